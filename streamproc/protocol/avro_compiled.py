"""Avro binary encoding compiled into plain Python functions, one writer and one reader per record.

fastavro walks the schema for every datum (and tries each union branch in turn), which
made encoding and decoding the largest share of the engine's CPU. The schemas are fixed,
so each record's writer and reader are generated once, as source, with the field order,
union branches and enum symbols written into the code. The bytes are Avro's binary
encoding, the same as fastavro's (the tests compare both on generated data), so any Avro
library still reads and writes our topics.

Most records are sparse (a history event sets 6 of WorkflowRecord's 38 fields): such a
record is written by a writer made for the fields its datum has (`avro_layouts.py`), and
read by comparing runs of defaulted fields with their defaults' bytes first. Large longs'
encodings are cached (a batch's records share a timestamp, a run's records its key).

Covers the types our schemas use: null, boolean, int, long, double, string, bytes, enum,
array, record (named and referenced by name) and unions. Anything else is refused when
compiling, not silently mis-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from streamproc.protocol.avro_layouts import Layouts

_DOUBLE = struct.Struct("<d")
_SMALL = [bytes([n]) for n in range(128)]
_PRIMITIVES = {"null", "boolean", "int", "long", "double", "string", "bytes"}
#: How many encoded longs `write_long` keeps (it forgets them all when full).
LONG_CACHE_SIZE = 4096
#: A record with this many defaulted fields or more is written by layout (`avro_layouts.py`).
LAYOUT_MIN_DEFAULTS = 8
#: How many defaulted fields a reader compares with their defaults' bytes at once.
READ_CHUNK = 8
_LONGS: dict[int, bytes] = {}
#: The Python type of a default -> the Avro types a reader gives that type for.
_READ_AS = {type(None): ("null",), bool: ("boolean",), int: ("int", "long"), str: ("string", "enum")}


def write_long(n: int) -> bytes:
    """Zig-zag varint of a 64-bit signed integer."""
    if type(n) is int:
        # Large values repeat from record to record (a batch's timestamp, a run's key), and
        # looking one up costs a tenth of encoding it.
        e = _LONGS.get(n)
        if e is None:
            if len(_LONGS) >= LONG_CACHE_SIZE:
                _LONGS.clear()
            e = _LONGS[n] = _varint(n)
        return e
    return _varint(n)


def _varint(n: int) -> bytes:
    if not -0x8000000000000000 <= n <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"{n} does not fit in an Avro long")
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _SMALL[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def write_int(n: int) -> bytes:
    if not -0x80000000 <= n <= 0x7FFFFFFF:
        raise ValueError(f"{n} does not fit in an Avro int")
    return write_long(n)


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """(value, next position) of the varint at `pos`."""
    z = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def write_bytes(data: bytes) -> bytes:
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    return write_long(len(data)) + bytes(data)


def write_bool(v: bool) -> bytes:
    if not isinstance(v, bool):
        raise TypeError(f"expected a boolean, got {type(v).__name__}")
    return b"\x01" if v else b"\x00"


def write_double(v: float) -> bytes:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    return _DOUBLE.pack(v)


class _Compiler:
    def __init__(self) -> None:
        self.named: dict[str, dict] = {}
        self.order: list[str] = []
        self.env: dict[str, Any] = {
            "write_long": write_long, "write_int": write_int, "write_bytes": write_bytes,
            "write_bool": write_bool, "write_double": write_double,
            "read_long": read_long, "unpack_double": _DOUBLE.unpack_from, "MISSING": object(),
            "LONGS": _LONGS,
        }
        self.lines: list[str] = []
        #: (name in the generated code, field type, namespace, default) of defaulted fields
        self.defaults: list[tuple[str, Any, str | None, Any]] = []
        self._n = 0

    def fresh(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    # schema registry ----------------------------------------------------------------------
    def register(self, schema: Any, namespace: str | None = None) -> None:
        if isinstance(schema, list):
            for branch in schema:
                self.register(branch, namespace)
        elif isinstance(schema, dict):
            kind = schema["type"]
            if kind in ("record", "enum"):
                full = _full_name(schema, namespace)
                self.named[full] = schema
                if kind == "record":
                    self.order.append(full)
                    for field in schema["fields"]:
                        self.register(field["type"], full.rpartition(".")[0] or None)
            elif kind == "array":
                self.register(schema["items"], namespace)
            elif not isinstance(kind, str) or kind not in _PRIMITIVES:
                raise NotImplementedError(f"Avro type {kind!r} is not compiled")

    def resolve(self, schema: Any, namespace: str | None) -> Any:
        if isinstance(schema, dict) and schema["type"] in _PRIMITIVES:
            return schema["type"]
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            full = schema if "." in schema or namespace is None else f"{namespace}.{schema}"
            if full not in self.named:
                raise NotImplementedError(f"unknown named type {schema!r}")
            return self.named[full]
        return schema

    # writers ------------------------------------------------------------------------------
    def write(self, schema: Any, v: str, ind: str, ns: str | None) -> list[str]:
        """Lines appending the encoding of the value named `v` to the bytearray `b`."""
        schema = self.resolve(schema, ns)
        if schema == "null":
            return [f"{ind}if {v} is not None: raise TypeError('expected null')"]
        if schema == "long":  # small values inline: most are -1, 0 or a count; large ones cached
            return [f"{ind}if type({v}) is int:",
                    f"{ind}    if -64 <= {v} < 64: b.append(({v} << 1) ^ ({v} >> 63))",
                    f"{ind}    else: b += LONGS.get({v}) or write_long({v})",
                    f"{ind}else: b += write_long({v})"]
        if schema == "int":
            return [f"{ind}if type({v}) is int and -64 <= {v} < 64: b.append(({v} << 1) ^ ({v} >> 63))",
                    f"{ind}else: b += write_int({v})"]
        if schema == "string":
            return [f"{ind}e = {v}.encode()", f"{ind}n = len(e)",
                    f"{ind}if n < 64: b.append(n << 1)", f"{ind}else: b += write_long(n)", f"{ind}b += e"]
        if schema in ("bytes", "boolean", "double"):
            fn = {"bytes": "write_bytes", "boolean": "write_bool", "double": "write_double"}[schema]
            return [f"{ind}b += {fn}({v})"]
        if isinstance(schema, list):
            return self._write_union(schema, v, ind, ns)
        kind = schema["type"]
        if kind == "record":
            return [f"{ind}w_{_ident(_full_name(schema, ns))}({v}, b)"]
        if kind == "enum":
            table = self.fresh("ENUM")
            self.env[table] = {s: write_long(i) for i, s in enumerate(schema["symbols"])}
            return [f"{ind}b += {table}[{v}]"]
        if kind == "array":
            item = self.fresh("x")
            return [f"{ind}if {v}:", f"{ind}    b += write_long(len({v}))",
                    f"{ind}    for {item} in {v}:",
                    *self.write(schema["items"], item, ind + "        ", ns), f"{ind}b.append(0)"]
        raise NotImplementedError(f"Avro type {kind!r} is not compiled")

    def _write_union(self, branches: list, v: str, ind: str, ns: str | None) -> list[str]:
        non_null = [(i, self.resolve(s, ns)) for i, s in enumerate(branches) if s != "null"]
        if len(non_null) != 1 or len(branches) > 2:
            raise NotImplementedError("only unions of null and one other type are compiled")
        index, other = non_null[0]
        lines = []
        if "null" in branches:
            lines += [f"{ind}if {v} is None:", f"{ind}    b += {write_long(branches.index('null'))!r}",
                      f"{ind}else:"]
            ind += "    "
        return lines + [f"{ind}b += {write_long(index)!r}", *self.write(other, v, ind, ns)]

    # readers ------------------------------------------------------------------------------
    def read(self, schema: Any, target: str, ind: str, ns: str | None) -> list[str]:
        """Lines reading one value at position `p` of `buf` into `target`, advancing `p`."""
        schema = self.resolve(schema, ns)
        if schema == "null":
            return [f"{ind}{target} = None"]
        if schema in ("long", "int"):
            return [f"{ind}c = buf[p]",
                    f"{ind}if c < 128: {target} = (c >> 1) ^ -(c & 1); p += 1",
                    f"{ind}else: {target}, p = read_long(buf, p)"]
        if schema in ("string", "bytes"):
            conv, empty = (".decode()", "''") if schema == "string" else ("", "b''")
            return [f"{ind}c = buf[p]",
                    f"{ind}if c == 0: {target} = {empty}; p += 1",  # an empty one: most, in a sparse record
                    f"{ind}else:",
                    f"{ind}    if c < 128: n = c >> 1; p += 1",
                    f"{ind}    else: n, p = read_long(buf, p)",
                    f"{ind}    if c & 1 or p + n > len(buf): raise ValueError(f'length at byte {{p}} is negative or past the end')",
                    f"{ind}    {target} = buf[p:p + n]{conv}", f"{ind}    p += n"]
        if schema == "boolean":
            return [f"{ind}c = buf[p]; p += 1",
                    f"{ind}if c > 1: raise ValueError('invalid boolean byte')", f"{ind}{target} = c == 1"]
        if schema == "double":
            return [f"{ind}{target} = unpack_double(buf, p)[0]; p += 8"]
        if isinstance(schema, list):
            # A branch index below 64 is one byte, its zig-zag value twice the index.
            lines = [f"{ind}c = buf[p]; p += 1"]
            for i, branch in enumerate(schema):
                lines += [f"{ind}{'if' if i == 0 else 'elif'} c == {2 * i}:",
                          *self.read(branch, target, ind + "    ", ns)]
            return lines + [f"{ind}else: raise ValueError(f'union branch byte {{c}} out of range')"]
        kind = schema["type"]
        if kind == "record":
            return [f"{ind}{target}, p = r_{_ident(_full_name(schema, ns))}(buf, p)"]
        if kind == "enum":
            table = self.fresh("SYMBOLS")
            self.env[table] = tuple(schema["symbols"])
            idx = self.fresh("e")
            return [f"{ind}{idx}, p = read_long(buf, p)",
                    f"{ind}if not 0 <= {idx} < {len(schema['symbols'])}: raise ValueError('enum index out of range')",
                    f"{ind}{target} = {table}[{idx}]"]
        if kind == "array":
            items, count, item = self.fresh("items"), self.fresh("count"), self.fresh("item")
            return [f"{ind}{items} = []", f"{ind}while True:",
                    f"{ind}    {count}, p = read_long(buf, p)",
                    f"{ind}    if {count} == 0: break",
                    f"{ind}    if {count} < 0: {count} = -{count}; _, p = read_long(buf, p)",
                    f"{ind}    for _ in range({count}):",
                    *self.read(schema["items"], item, ind + "        ", ns),
                    f"{ind}        {items}.append({item})",
                    f"{ind}{target} = {items}"]
        raise NotImplementedError(f"Avro type {kind!r} is not compiled")

    def encode_defaults(self) -> None:
        """The bytes of each defaulted field's default, for the writers (compiled first)."""
        for name, schema, ns, default in self.defaults:
            source = ["def write_default(v, b):", *self.write(schema, "v", "    ", ns), "    return b"]
            exec(compile("\n".join(source), f"<avro default {name}>", "exec"), self.env)  # noqa: S102
            self.env[name] = bytes(self.env.pop("write_default")(default, bytearray()))

    # records ------------------------------------------------------------------------------
    def compile_record(self, full: str, positional: bool = False) -> None:
        schema = self.named[full]
        ns = full.rpartition(".")[0] or None
        ident = _ident(full)
        #: (name, lines writing `v`, the name of its default's bytes or None) of each field
        fields: list[tuple[str, list[str], str | None]] = []
        r = [f"def r_{ident}(buf, p):"]
        for i, field in enumerate(schema["fields"]):
            default = None
            if "default" in field:
                default = self.fresh("DEFAULT")
                self.defaults.append((default, field["type"], ns, field["default"]))
            fields.append((field["name"], self.write(field["type"], "v", "    ", ns), default))
        r += self._read_fields(schema["fields"], ns)
        r.append("    return {" + ", ".join(f"{f['name']!r}: f{i}" for i, f in enumerate(schema["fields"])) + "}, p")
        if sum(default is not None for _, _, default in fields) < LAYOUT_MIN_DEFAULTS:
            self.lines += [*self._generic_writer(f"w_{ident}", fields), ""]
        else:
            # A sparse record (a history event sets 6 of WorkflowRecord's 38 fields) is written
            # by a writer made for the fields its datum has (`Layouts`), instead of looking
            # up every field; a datum that is not a dict, by the generic writer.
            self.env[f"LAYOUT_{ident}"] = layouts = Layouts(ident, fields, self.env)
            self.env[f"LAYOUTS_{ident}"] = layouts.made
            self.lines += [*self._generic_writer(f"g_{ident}", fields), "",
                           f"def w_{ident}(d, b):", "    if type(d) is dict:",
                           f"        return (LAYOUTS_{ident}.get(tuple(d)) or LAYOUT_{ident}(d))(d, b)",
                           f"    return g_{ident}(d, b)", ""]
        self.lines += [*r, ""]
        if positional:  # the values in field order, all given; read back as a tuple
            self.lines.append(f"def p_{ident}(b, {', '.join(f'v{i}' for i in range(len(fields)))}):")
            for i, (_, lines, _) in enumerate(fields):
                self.lines += [f"    v = v{i}", *lines]
            self.lines += ["    return b", "", f"def t_{ident}(buf, p):", *r[1:-1],
                           f"    return ({''.join(f'f{i}, ' for i in range(len(fields)))}), p", ""]

    def _read_fields(self, fields: list[dict], ns: str | None) -> list[str]:
        """Lines reading each field into f0, f1, ...: a sparse record is mostly defaults, so
        each run of up to READ_CHUNK fields with plain defaults is first compared with its
        defaults' bytes, and read field by field only when they differ. (A field's encoding
        ends where its bytes say, so bytes that start with a default's encoding hold it.)"""
        lines: list[str] = []
        chunk: list[tuple[int, dict]] = []

        def flush() -> None:
            reads = [line for i, field in chunk for line in self.read(field["type"], f"f{i}", "        ", ns)]
            if len(chunk) < 2:
                lines.extend(line[4:] for line in reads)
            else:
                data = b"".join(self._default_bytes(field, ns) for _, field in chunk)
                lines.extend([f"    if buf.startswith({data!r}, p):",
                              f"        {', '.join(f'f{i}' for i, _ in chunk)} = "
                              f"{', '.join(repr(field['default']) for _, field in chunk)}; p += {len(data)}",
                              "    else:", *reads])
            chunk.clear()

        for i, field in enumerate(fields):
            plain = self._plain_default(field, ns)
            if not plain:
                flush()  # no default, or one a reader must not share (a list, a dict)
            chunk.append((i, field))
            if not plain or len(chunk) == READ_CHUNK:
                flush()
        flush()
        return lines

    def _plain_default(self, field: dict, ns: str | None) -> bool:
        """Whether the field's default is a constant the reader may give as it is: an
        immutable one, of the Python type its type reads as (JSON's 0 is a double's default
        too, but a double reads as 0.0)."""
        if "default" not in field:
            return False
        schema = field["type"]
        schema = self.resolve(schema[0] if isinstance(schema, list) else schema, ns)  # a default is of the first branch
        kind = schema.get("type") if isinstance(schema, dict) else schema
        return kind in _READ_AS.get(type(field["default"]), ())

    def _default_bytes(self, field: dict, ns: str | None) -> bytes:
        source = ["def write_default(v, b):", *self.write(field["type"], "v", "    ", ns), "    return b"]
        made: dict = {}
        exec(compile("\n".join(source), "<avro default>", "exec"), self.env, made)  # noqa: S102
        return bytes(made["write_default"](field["default"], bytearray()))

    def _generic_writer(self, fn: str, fields: list[tuple[str, list[str], str | None]]) -> list[str]:
        w = [f"def {fn}(d, b):"]
        for name, lines, default in fields:
            if default is not None:
                # A field the datum leaves out is written as its default's bytes, encoded
                # once (`encode_defaults`), not encoded again each time.
                w += [f"    v = d.get({name!r}, MISSING)", f"    if v is MISSING: b += {default}", "    else:"]
                w += ["    " + line for line in lines]
            else:
                w += [f"    v = d.get({name!r})", *lines]
        return [*w, "    return b"]


def _full_name(schema: dict, namespace: str | None) -> str:
    name = schema["name"]
    ns = schema.get("namespace", namespace)
    return name if "." in name or not ns else f"{ns}.{name}"


def _ident(full_name: str) -> str:
    return full_name.replace(".", "_")


class Compiled(NamedTuple):
    """One record's codec. encode(datum) -> bytes; decode(data) -> (datum, bytes read);
    write_fields(bytearray, *values) appends the record of these field values (all of
    them, in the schema's order: no dict to build when the caller has them at hand);
    read_fields(data, 0) -> (the field values in that order, bytes read). All
    raise on data that does not fit the schema (TypeError, ValueError, KeyError,
    IndexError, AttributeError). `writers`: each named record's writer, by full name
    (writer(datum, bytearray) appends it)."""

    encode: Callable[[dict], bytes]
    decode: Callable[[bytes], tuple[dict, int]]
    write_fields: Callable[..., bytearray]
    read_fields: Callable[[bytes, int], tuple[tuple, int]]
    writers: dict[str, Callable[[Any, bytearray], bytearray]]


def compile_codec(schemas: list[dict], root: str) -> Compiled:
    """The codec of the record named `root`; `schemas` in dependency order."""
    c = _Compiler()
    for schema in schemas:
        c.register(schema)
    for full in c.order:
        c.compile_record(full, positional=full == root)
    exec(compile("\n".join(c.lines), f"<avro {root}>", "exec"), c.env)  # noqa: S102 - our own generated code
    c.encode_defaults()
    writer, reader = c.env[f"w_{_ident(root)}"], c.env[f"r_{_ident(root)}"]

    def encode(datum: dict) -> bytes:
        return bytes(writer(datum, bytearray()))

    def decode(data: bytes) -> tuple[dict, int]:
        return reader(data, 0)

    return Compiled(encode, decode, c.env[f"p_{_ident(root)}"], c.env[f"t_{_ident(root)}"],
                    {full: c.env[f"w_{_ident(full)}"] for full in c.order})


def compile_schemas(schemas: list[dict], root: str) -> tuple[Callable[[dict], bytes],
                                                             Callable[[bytes], tuple[dict, int]]]:
    """(encode, decode) of the record named `root` (`compile_codec`)."""
    return compile_codec(schemas, root)[:2]
