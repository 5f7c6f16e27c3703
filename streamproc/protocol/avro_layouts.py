"""Writers of one Avro record made for the fields a datum has (`avro_compiled.py` uses them
for records with many defaulted fields).

A history event is a sparse record: it sets 6 of WorkflowRecord's 38 fields. The generic
writer looks up all 38 in the datum; a writer made for the datum's keys writes the
present fields from `d[name]` and each run of left-out fields between them as one
constant, their defaults' bytes. Such writers are made the first time a key layout is
seen and kept, up to LAYOUT_CACHE_SIZE per record.
"""

from __future__ import annotations

from collections.abc import Callable

#: How many layouts one record keeps at most (datums from outside may carry any keys).
LAYOUT_CACHE_SIZE = 256


class Layouts:
    """The writers of one record made for the fields a datum has, by its keys in order: the
    present fields written from `d[name]`, each run of left-out defaulted fields as one
    bytes constant. At most LAYOUT_CACHE_SIZE of them per record (datums from outside may
    carry any keys); past that, the generic writer. `fields`: each field's name, the lines
    of generated code writing its value `v` to the bytearray `b`, and the name in `env` (the
    compiled code's namespace) of its default's bytes, None if it has no default."""

    def __init__(self, ident: str, fields: list[tuple[str, list[str], str | None]], env: dict) -> None:
        self.ident = ident
        self.fields = fields
        self.env = env
        self.made: dict[tuple, Callable] = {}

    def __call__(self, d: dict) -> Callable:
        keys = tuple(d)
        if len(self.made) >= LAYOUT_CACHE_SIZE:
            return self.env[f"g_{self.ident}"]
        present = set(keys)
        source, run = ["def layout(d, b):"], b""
        for name, lines, default in self.fields:
            if default is not None and name not in present:
                run += self.env[default]
                continue
            if run:
                source.append(f"    b += {run!r}")
                run = b""
            source += [f"    v = d[{name!r}]" if name in present else "    v = None", *lines]
        if run:
            source.append(f"    b += {run!r}")
        made: dict = {}
        exec(compile("\n".join([*source, "    return b"]), f"<avro layout {self.ident}>", "exec"),  # noqa: S102
             self.env, made)
        self.made[keys] = made["layout"]
        return made["layout"]
