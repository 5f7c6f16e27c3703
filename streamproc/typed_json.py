"""JSON values <-> typed Python values, driven by type hints, as Temporal's default converter.

Encoding: orjson writes dataclasses, ``datetime``/``date``/``time`` (ISO 8601, as
``isoformat()``), ``UUID`` (its string) and enums (their value) natively; `json_default`
adds what it does not know: ``timedelta`` (an ISO 8601 duration, ``"P1DT2S"``), ``bytes``
inside a structure (base64), sets, ``Decimal`` and pydantic models (``model_dump(mode="json")``).

Decoding: `decode_typed` builds the value of a type hint from JSON text with msgspec
(``msgspec.json.decode(..., type=hint)``): nested dataclasses, the types above, ``list[T]``,
``dict[K, V]`` (also with int or enum keys, which JSON spells as strings), ``tuple``,
``Optional`` and unions, ``Literal``, ``TypedDict``, msgspec Structs, and pydantic models
when pydantic is installed. msgspec is a mature, C-implemented library that validates
while it decodes, so a value that does not match its hint fails here with the path of the
mismatch (``Expected `str`, got `int` - at `$.name```) instead of deep in user code, and
the wire stays plain JSON that any language reads.
"""

from __future__ import annotations

import base64
import decimal
import sys
from datetime import timedelta
from typing import Any

import msgspec

__all__ = ["json_default", "decode_typed", "wants_conversion"]


def _pydantic_model(cls: Any) -> bool:
    # Only a program that imported pydantic can hold or name a model: never import it here.
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(cls, type) and issubclass(cls, pydantic.BaseModel)


def json_default(value: Any) -> Any:
    """orjson's ``default``: the JSON-able form of a value orjson does not write itself.
    Raises TypeError for anything else (orjson reports it as unserialisable)."""
    if _pydantic_model(type(value)):
        return value.model_dump(mode="json")
    if isinstance(value, timedelta):
        return msgspec.to_builtins(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode()
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value, enc_hook=json_default)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _decode_hook(hint: Any, obj: Any) -> Any:
    """msgspec's ``dec_hook``: builds the types msgspec has no rule for."""
    if _pydantic_model(hint):
        return hint.model_validate(obj)
    name = getattr(hint, "__qualname__", repr(hint))
    raise TypeError(f"no rule to build a {name} from JSON; supported: dataclasses, enums, datetime, date, "
                    "time, timedelta, UUID, Decimal, bytes, collections of them, and pydantic models")


def wants_conversion(hint: Any) -> bool:
    """Whether decoding as `hint` can differ from the plain JSON value (it names a type)."""
    return hint is not None and hint is not Any and hint is not object


def decode_typed(json_text: bytes, hint: Any) -> Any:
    """The value of type `hint` that `json_text` holds. Raises msgspec.ValidationError (a
    ValueError) when the JSON does not fit the hint, TypeError when the hint is no type
    msgspec understands."""
    return msgspec.json.decode(json_text, type=hint, dec_hook=_decode_hook)
