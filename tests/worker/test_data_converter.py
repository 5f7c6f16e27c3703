"""The data converter without a broker: each built-in encoding's round trip and wire form,
a custom converter in front of the defaults, the envelope escape, unknown encodings."""

from __future__ import annotations

import base64
from decimal import Decimal

import orjson
import pytest

from streamproc.converter import DataConverter, PayloadEncodingError
from tests.support.money_converter import WITH_MONEY, Money, MoneyConverter

DEFAULT = DataConverter.default()


@pytest.mark.parametrize("value, encoding", [
    (None, "binary/null"), (b"\x00\xffraw", "binary/plain"), (b"", "binary/plain"),
    ({"n": 1, "tags": ["a"]}, "json/plain"), ([1, 2.5, "x", True], "json/plain"), ("text", "json/plain"),
])
def test_each_builtin_round_trips_through_its_payload_and_the_wire(value, encoding):
    payload = DEFAULT.to_payload(value)
    assert payload.encoding == encoding
    assert DEFAULT.from_payload(payload) == value
    assert DEFAULT.decode(DEFAULT.encode(value)) == value
    assert DEFAULT.decode_args(DEFAULT.encode_args([value, value])) == (value, value)


def test_json_stays_plain_json_and_null_stays_null_on_the_wire():
    assert orjson.loads(DEFAULT.encode({"order": 7})) == {"order": 7}
    assert DEFAULT.encode(None) == "null"
    assert orjson.loads(DEFAULT.encode_args([1, "a", None])) == [1, "a", None]
    # Non-string dict keys become strings, as the record text always did.
    assert DEFAULT.decode(DEFAULT.encode({1: "one"})) == {"1": "one"}


def test_bytes_travel_in_a_tagged_base64_envelope():
    wire = orjson.loads(DEFAULT.encode(b"\x01\x02"))
    assert wire == {"metadata": {"encoding": "binary/plain"}, "data": base64.b64encode(b"\x01\x02").decode()}


def test_text_without_a_tag_is_json_plain_so_hand_written_commands_work():
    assert DEFAULT.decode_args('{"amount": 5}') == ({"amount": 5},)
    assert DEFAULT.decode_args("[1, 2]") == (1, 2)
    assert DEFAULT.decode_args(None) == () and DEFAULT.decode_args("null") == ()
    assert DEFAULT.decode("") is None


def test_a_custom_converter_in_front_of_the_defaults_wins_for_its_values_only():
    price = Money(Decimal("12.50"), "EUR")
    wire = orjson.loads(WITH_MONEY.encode_args([price, {"qty": 2}, b"x"]))
    assert wire[0] == {"metadata": {"encoding": "text/money"}, "data": base64.b64encode(b"EUR 12.50").decode()}
    assert wire[1] == {"qty": 2}
    assert WITH_MONEY.decode_args(orjson.dumps(wire).decode()) == (price, {"qty": 2}, b"x")
    with pytest.raises(TypeError, match="not JSON serializable"):  # json/plain is the last resort
        WITH_MONEY.encode(object())
    with pytest.raises(TypeError, match="no payload converter accepts a value of type int"):
        DataConverter([MoneyConverter()]).encode(3)


@pytest.mark.parametrize("user_dict", [
    {"metadata": {"encoding": "binary/plain"}, "data": "AAEC"},
    {"metadata": {"encoding": "json/plain"}, "data": "not base64 at all!"},
])
def test_user_data_shaped_like_an_envelope_comes_back_as_the_same_dict(user_dict):
    wire = orjson.loads(DEFAULT.encode(user_dict))
    assert wire["metadata"] == {"encoding": "json/plain"}  # escaped
    assert DEFAULT.decode(DEFAULT.encode(user_dict)) == user_dict
    assert DEFAULT.decode_args(DEFAULT.encode_args([user_dict])) == (user_dict,)
    # Near misses are ordinary data and stay plain.
    near = {"metadata": {"encoding": "binary/plain"}, "data": "AAEC", "extra": 1}
    assert orjson.loads(DEFAULT.encode(near)) == near


def test_an_unknown_encoding_is_a_clear_error_naming_it_and_the_known_ones():
    text = WITH_MONEY.encode(Money(Decimal("1"), "USD"))
    with pytest.raises(PayloadEncodingError, match=r"'text/money' has no converter.*json/plain"):
        DEFAULT.decode(text)
    with pytest.raises(PayloadEncodingError, match="not base64"):
        DEFAULT.decode('{"metadata": {"encoding": "binary/plain"}, "data": "@@"}')
    with pytest.raises(ValueError):  # PayloadEncodingError is a ValueError: a failure, not a crash
        DEFAULT.decode_args("[1, " + text + "]")


def test_a_converter_list_must_not_be_empty():
    with pytest.raises(ValueError, match="at least one"):
        DataConverter([])
