"""The data converter: how values become payloads on the wire and back (Temporal's model).

A `Payload` is bytes with an encoding tag. A `DataConverter` holds an ordered list of
`EncodingPayloadConverter`s: on encode the first that accepts a value wins, on decode the
payload's tag picks the converter. The default list is `binary/null`, `binary/plain`
(bytes) and `json/plain` (everything JSON can hold). Add your own in front of them:

    DataConverter([MyMoneyConverter(), *DataConverter.default().converters])

Wire form, chosen so records stay readable JSON and hand-written commands keep working
(the engine never looks inside): a `json/plain` payload is the plain JSON value, and a
value with no tag is `json/plain`; `binary/null` is `null`; any other encoding is the
envelope ``{"metadata": {"encoding": "<name>"}, "data": "<base64>"}``. A user's dict that
looks like that envelope is itself sent in a `json/plain` envelope so it comes back as
the dict. Argument lists and details are one JSON list of such values. Nothing is pickled.

Type hints, as Temporal's default converter: `json/plain` writes dataclasses, datetimes,
UUIDs, enums, timedeltas, pydantic models (see `streamproc.typed_json`) as plain JSON, and
decoding with a `type_hint` (a parameter's or a result's annotation) builds that type
again; a value that does not fit raises `PayloadTypeError`. Without a hint a value comes
back as plain JSON (dicts and lists), as before.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import msgspec
import orjson

from streamproc.typed_json import decode_typed, json_default, wants_conversion
from streamproc.unsupported import unsupported_names

__all__ = ["Payload", "EncodingPayloadConverter", "BinaryNullPayloadConverter",
           "BinaryPlainPayloadConverter", "JSONPlainPayloadConverter", "DataConverter",
           "PayloadEncodingError", "PayloadTypeError", "JSON_PLAIN"]

JSON_PLAIN = "json/plain"
BINARY_NULL = "binary/null"
# Dict keys that are not strings (ints, enums) become strings rather than failing.
_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS


@dataclass(frozen=True, slots=True)
class Payload:
    encoding: str
    data: bytes


class PayloadEncodingError(ValueError):
    """A payload this converter cannot decode: an unknown encoding or malformed data.

    A ValueError, so a workflow or activity that meets one fails like any other error
    (a failed task or attempt), never the worker.
    """


class PayloadTypeError(PayloadEncodingError):
    """A payload whose JSON does not fit the type hint it is decoded as, e.g.
    ``cannot decode json/plain payload as Greeting: Expected `str`, got `int` - at `$.name```."""


@runtime_checkable
class EncodingPayloadConverter(Protocol):
    """Converts values of one encoding. `to_payload` returns None for values it declines."""

    @property
    def encoding(self) -> str: ...

    def to_payload(self, value: Any) -> Payload | None: ...

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any: ...


class BinaryNullPayloadConverter:
    encoding: ClassVar[str] = BINARY_NULL

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(self.encoding, b"") if value is None else None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        return None


class BinaryPlainPayloadConverter:
    encoding: ClassVar[str] = "binary/plain"

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(self.encoding, bytes(value)) if isinstance(value, (bytes, bytearray)) else None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        return payload.data


class JSONPlainPayloadConverter:
    """Anything orjson can write, plus what `typed_json.json_default` adds; raises TypeError
    (it is the last resort) for the rest. Decodes as `type_hint` when one is given."""

    encoding: ClassVar[str] = JSON_PLAIN

    def to_payload(self, value: Any) -> Payload | None:
        return Payload(self.encoding, orjson.dumps(value, default=json_default, option=_JSON_OPTIONS))

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        if wants_conversion(type_hint):
            return _decode_as(payload.data, type_hint)
        try:
            return orjson.loads(payload.data)
        except orjson.JSONDecodeError as exc:
            raise PayloadEncodingError(f"json/plain payload is not JSON: {exc}") from None


def _decode_as(json_text: bytes, type_hint: Any) -> Any:
    name = getattr(type_hint, "__qualname__", None) or repr(type_hint)
    try:
        return decode_typed(json_text, type_hint)
    except msgspec.ValidationError as exc:  # one line, also for pydantic's multi-line reports
        reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise PayloadTypeError(f"cannot decode json/plain payload as {name}: {reason}") from None
    except msgspec.DecodeError as exc:
        raise PayloadEncodingError(f"json/plain payload is not JSON: {exc}") from None
    except TypeError as exc:  # a hint msgspec does not understand
        raise PayloadTypeError(f"cannot decode json/plain payload as {name}: {exc}") from None


def _is_envelope(value: Any) -> bool:
    """Whether a wire JSON value has exactly the envelope's shape."""
    if not isinstance(value, dict) or value.keys() != {"metadata", "data"}:
        return False
    metadata = value["metadata"]
    return (isinstance(metadata, dict) and isinstance(metadata.get("encoding"), str)
            and isinstance(value["data"], str))


def _looks_like_envelope(json_text: bytes) -> bool:
    # Cheap test first: only an object naming "metadata" can be mistaken for an envelope.
    return (json_text[:1] == b"{" and b'"metadata"' in json_text
            and _is_envelope(orjson.loads(json_text)))


def _envelope_json(payload: Payload) -> bytes:
    return orjson.dumps({"metadata": {"encoding": payload.encoding},
                         "data": base64.b64encode(payload.data).decode()})


class DataConverter:
    """Values <-> payloads <-> wire JSON text, through an ordered list of converters."""

    _default: ClassVar[DataConverter | None] = None

    def __init__(self, converters: Sequence[EncodingPayloadConverter]) -> None:
        if not converters:
            raise ValueError("a DataConverter needs at least one payload converter, got none")
        self.converters: tuple[EncodingPayloadConverter, ...] = tuple(converters)
        # The first converter of an encoding decodes it (a custom one may shadow a built-in).
        self._by_encoding: dict[str, EncodingPayloadConverter] = {}
        for converter in self.converters:
            self._by_encoding.setdefault(converter.encoding, converter)

    @classmethod
    def default(cls) -> DataConverter:
        if cls._default is None:
            cls._default = DataConverter([BinaryNullPayloadConverter(), BinaryPlainPayloadConverter(),
                                          JSONPlainPayloadConverter()])
        return cls._default

    # -- values <-> payloads ------------------------------------------------------------
    def to_payload(self, value: Any) -> Payload:
        for converter in self.converters:
            payload = converter.to_payload(value)
            if payload is not None:
                return payload
        raise TypeError(f"no payload converter accepts a value of type {type(value).__name__}; "
                        f"converters tried: {', '.join(c.encoding for c in self.converters)}")

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        converter = self._by_encoding.get(payload.encoding)
        if converter is None:
            raise PayloadEncodingError(
                f"payload encoding {payload.encoding!r} has no converter here; "
                f"known encodings: {', '.join(self._by_encoding)}")
        return converter.from_payload(payload, type_hint)

    # -- one wire value -----------------------------------------------------------------
    def value_to_wire(self, value: Any) -> bytes:
        """The JSON text of one value's wire form."""
        payload = self.to_payload(value)
        if payload.encoding == BINARY_NULL:
            return b"null"
        if payload.encoding != JSON_PLAIN:
            return _envelope_json(payload)
        if _looks_like_envelope(payload.data):
            return _envelope_json(payload)  # user data shaped like an envelope: escape it
        return payload.data

    def value_from_wire(self, wire: Any, type_hint: type | None = None) -> Any:
        """The value of one parsed wire JSON value."""
        if wire is None:
            return None  # binary/null: None whatever the hint, as Temporal's converter
        if not _is_envelope(wire):
            builtin = type(self._by_encoding.get(JSON_PLAIN)) is JSONPlainPayloadConverter
            if builtin and not wants_conversion(type_hint):
                return wire  # the built-in would only parse what we just parsed
            return self.from_payload(Payload(JSON_PLAIN, orjson.dumps(wire, option=_JSON_OPTIONS)),
                                     type_hint)
        try:
            data = base64.b64decode(wire["data"], validate=True)
        except binascii.Error as exc:
            raise PayloadEncodingError(f"payload data is not base64: {exc}") from None
        return self.from_payload(Payload(wire["metadata"]["encoding"], data), type_hint)

    # -- record fields (JSON text) ------------------------------------------------------
    def encode(self, value: Any) -> str:
        """The record text of one value (a result); raises TypeError if nothing accepts it."""
        return self.value_to_wire(value).decode()

    def decode(self, text: str | None, type_hint: type | None = None) -> Any:
        if text is None or text == "":
            return None
        return self.value_from_wire(_parse(text), type_hint)

    def encode_args(self, args: Sequence[Any]) -> str:
        """Arguments (or details) as one JSON list of wire values."""
        return (b"[" + b",".join(self.value_to_wire(a) for a in args) + b"]").decode()

    def decode_args(self, text: str | None, type_hints: Sequence[Any] = ()) -> tuple[Any, ...]:
        """A JSON list is the positional arguments; null is none; any other value is the
        single argument (a command written by hand need not wrap it in a list). Argument
        i is decoded as ``type_hints[i]`` when there is one (extra arguments stay plain)."""
        if text is None or text == "":
            return ()
        wire = _parse(text)
        if wire is None:
            return ()
        if not isinstance(wire, list):
            wire = [wire]
        hints = list(type_hints)[:len(wire)]
        hints += [None] * (len(wire) - len(hints))
        return tuple(self.value_from_wire(w, hint) for w, hint in zip(wire, hints))

    # Details (heartbeat, error, cancellation) travel exactly like arguments.
    encode_details = encode_args
    decode_details = decode_args


def _parse(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise PayloadEncodingError(f"payload text is not JSON: {exc}") from None


_CHAIN = "Temporal's converter classes (build a DataConverter from a list of EncodingPayloadConverters)"
__getattr__ = unsupported_names(__name__, {
    "PayloadCodec": "payload codecs (encryption, compression)",
    "PayloadConverter": _CHAIN, "CompositePayloadConverter": _CHAIN, "DefaultPayloadConverter": _CHAIN,
    "JSONTypeConverter": _CHAIN, "AdvancedJSONEncoder": _CHAIN,
    "BinaryProtobufPayloadConverter": "protobuf payloads", "JSONProtoPayloadConverter": "protobuf payloads",
    "FailureConverter": "custom failure converters", "DefaultFailureConverter": "custom failure converters",
})
