"""The user's own Kafka client settings: how streamproc reaches a secured cluster.

Any librdkafka property can be given, to every client streamproc builds (engine, workers,
client, admin, readers, CLI), in two ways:

- a properties file, ``STREAMPROC_KAFKA_CONFIG=client.properties``, in the format Kafka's
  own tools and Confluent Cloud's "client config" download use (``key=value``, ``#``
  comments);
- environment variables ``STREAMPROC_KAFKA_<PROPERTY>``, the property's name in capitals with
  dots as underscores: ``STREAMPROC_KAFKA_SECURITY_PROTOCOL=SASL_SSL`` is
  ``security.protocol``. They win over the file.

A user value wins over streamproc's tuning (timeouts, batching, client ids), but not over
the properties that carry its guarantees: those are refused at start, with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

PREFIX = "STREAMPROC_KAFKA_"
ENV_CONFIG_FILE = PREFIX + "CONFIG"
#: Variables under the prefix that are not client properties (the local broker's Kafka version).
NOT_PROPERTIES = {ENV_CONFIG_FILE, PREFIX + "VERSION"}

_EXACTLY_ONCE = "exactly-once processing needs it"
#: Properties with one value every streamproc client needs: another one is refused.
REQUIRED_VALUES: dict[str, tuple[set[str], str]] = {
    "isolation.level": ({"read_committed"}, "a reader must never see records of aborted or open transactions"),
    "enable.idempotence": ({"true"}, _EXACTLY_ONCE),
    "acks": ({"all", "-1"}, _EXACTLY_ONCE),
}
#: Properties streamproc sets itself, per client: any user value is refused.
OWNED: dict[str, str] = {
    "transactional.id": "the engine derives one per engine id and partition set",
    "transaction.timeout.ms": "the engine derives it from its own commit deadlines",
    "group.id": "each client joins the group its role needs",
    "group.instance.id": "the engine uses its engine id",
    "enable.auto.commit": "each client commits offsets the way its delivery guarantees need",
    "enable.auto.offset.store": "each client stores offsets the way its delivery guarantees need",
    "auto.offset.reset": "each reader starts where its role needs",
    "enable.partition.eof": "the state restore relies on its own choice",
    "partition.assignment.strategy": "the engine's rebalance callbacks expect the cooperative protocol",
}


class KafkaConfigError(ValueError):
    """A user setting that cannot be used; the message is one line with the property and value."""


def parse_properties(text: str) -> dict[str, str]:
    """A java.util.Properties text: ``key=value``, ``key: value`` or ``key value`` lines,
    ``#``/``!`` comments, a trailing backslash continuing a line; keys and values trimmed."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    for i, ch in enumerate(line):
        if ch in "=:":
            return line[:i].strip(), line[i + 1:].strip()
        if ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:]
            return line[:i].strip(), rest.strip()
    return line.strip(), ""


def property_name(variable: str) -> str:
    """``STREAMPROC_KAFKA_SASL_MECHANISMS`` -> ``sasl.mechanisms``."""
    return variable[len(PREFIX):].lower().replace("_", ".")


def user_properties(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The user's properties: the file's, then the environment's over them; checked.

    Read on each call (a small file), so every client built after a change sees it.
    """
    env = os.environ if environ is None else environ
    props: dict[str, str] = {}
    path = env.get(ENV_CONFIG_FILE, "").strip()
    if path:
        try:
            props.update(parse_properties(Path(path).expanduser().read_text(encoding="utf-8")))
        except OSError as exc:
            raise KafkaConfigError(f"{ENV_CONFIG_FILE}={path}: cannot read it ({exc.strerror or exc})") from None
    for variable, value in env.items():
        if variable.startswith(PREFIX) and variable not in NOT_PROPERTIES and value.strip():
            props[property_name(variable)] = value.strip()
    check(props)
    return props


def check(props: dict[str, str]) -> None:
    """Refuse a value that would break streamproc's guarantees (one line: property, value, why)."""
    for name, value in props.items():
        if name in OWNED:
            raise KafkaConfigError(f"Kafka property {name}={value} cannot be set: streamproc sets it itself "
                                   f"({OWNED[name]})")
        if name in REQUIRED_VALUES:
            allowed, why = REQUIRED_VALUES[name]
            if value.lower() not in allowed:
                raise KafkaConfigError(f"Kafka property {name}={value} is not allowed: it must be "
                                       f"{' or '.join(sorted(allowed))} ({why})")


def with_user_properties(conf: dict, bootstrap: str | None) -> dict:
    """`conf` with the user's properties over it; `bootstrap` (when given) stays the servers."""
    user = user_properties()
    if bootstrap:
        user.pop("bootstrap.servers", None)
    return {**conf, **user}


def user_bootstrap() -> str | None:
    """The bootstrap servers of the user's properties (a downloaded client.properties has them)."""
    return user_properties().get("bootstrap.servers")
