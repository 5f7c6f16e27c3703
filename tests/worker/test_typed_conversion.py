"""Values decoded by type hints, as Temporal's default converter: round trips of nested
dataclasses, enums, datetimes, UUIDs and optionals through plain JSON, and the errors a
value that does not fit its hint raises."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Optional

import orjson
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.converter import DataConverter, PayloadEncodingError, PayloadTypeError
from streamproc.type_hints import call_types

CONVERTER = DataConverter.default()


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Line:
    sku: str
    quantity: int
    colour: Colour
    shipped: Optional[datetime] = None


@dataclasses.dataclass
class Order:
    id: uuid.UUID
    placed: datetime
    due: date
    window: timedelta
    priority: Priority
    lines: list[Line]
    by_warehouse: dict[str, Line | None]
    tags: tuple[str, ...] = ()
    note: bytes = b""


class Customer(pydantic.BaseModel):
    name: str
    since: datetime


@dataclasses.dataclass
class Account:
    customer: Customer
    limits: dict[int, float]


_ZONES = st.sampled_from([UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))])
_DATETIMES = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2300, 1, 1),
                          timezones=st.none() | _ZONES)  # naive ones too
_TEXT = st.text(max_size=8)
_LINES = st.builds(Line, sku=_TEXT, quantity=st.integers(-2**53, 2**53), colour=st.sampled_from(Colour),
                   shipped=st.none() | _DATETIMES)
_ORDERS = st.builds(
    Order, id=st.uuids(), placed=_DATETIMES, due=st.dates(), priority=st.sampled_from(Priority),
    window=st.timedeltas(min_value=timedelta(days=-9999), max_value=timedelta(days=9999)),
    lines=st.lists(_LINES, max_size=3), by_warehouse=st.dictionaries(_TEXT, st.none() | _LINES, max_size=3),
    tags=st.lists(_TEXT, max_size=3).map(tuple), note=st.binary(max_size=8))


@settings(max_examples=200, deadline=None)
@given(order=_ORDERS)
def test_nested_dataclasses_round_trip_through_plain_json(order):
    text = CONVERTER.encode(order)
    assert CONVERTER.decode(text, Order) == order
    plain = CONVERTER.decode(text)  # without a hint: plain JSON, readable by any language
    assert plain["id"] == str(order.id) and plain["priority"] == order.priority.value
    assert datetime.fromisoformat(plain["placed"]) == order.placed


@settings(max_examples=100, deadline=None)
@given(orders=st.lists(_ORDERS, max_size=2), maybe=st.none() | _ORDERS)
def test_argument_lists_decode_each_argument_by_its_hint(orders, maybe):
    text = CONVERTER.encode_args([orders, maybe, "extra"])
    assert CONVERTER.decode_args(text, [list[Order], Optional[Order]]) == (orders, maybe, "extra")


def test_datetimes_are_written_as_temporal_writes_them():
    placed = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
    assert CONVERTER.encode(placed) == f'"{placed.isoformat()}"'
    assert CONVERTER.encode(timedelta(days=1, seconds=2)) == '"P1DT2S"'
    assert CONVERTER.encode(uuid.UUID(int=1)) == '"00000000-0000-0000-0000-000000000001"'
    assert CONVERTER.encode([Colour.RED, Priority.HIGH]) == '["red",2]'


def test_pydantic_models_round_trip_inside_dataclasses():
    account = Account(Customer(name="Ada", since=datetime(2020, 1, 1, tzinfo=UTC)), {7: 1.5})
    text = CONVERTER.encode(account)
    assert orjson.loads(text) == {"customer": {"name": "Ada", "since": "2020-01-01T00:00:00Z"},
                                  "limits": {"7": 1.5}}
    assert CONVERTER.decode(text, Account) == account
    assert CONVERTER.decode(CONVERTER.encode(account.customer), Customer) == account.customer


def test_bytes_none_and_unhinted_values_keep_their_plain_behaviour():
    assert CONVERTER.decode(CONVERTER.encode(b"\x00\xff"), bytes) == b"\x00\xff"
    assert CONVERTER.decode(CONVERTER.encode(None), Order) is None  # binary/null, whatever the hint
    assert CONVERTER.decode('{"a": [1, 2]}') == {"a": [1, 2]}
    assert CONVERTER.decode_args('[{"a": 1}, 2]', [None]) == ({"a": 1}, 2)


def test_a_value_that_does_not_fit_its_hint_says_where():
    with pytest.raises(PayloadTypeError, match=r"as Line: Expected `int`, got `str` - at `\$.quantity`"):
        CONVERTER.decode('{"sku": "a", "quantity": "many", "colour": "red"}', Line)
    with pytest.raises(PayloadTypeError, match=r"Invalid enum value 'blue' - at `\$.colour`"):
        CONVERTER.decode('{"sku": "a", "quantity": 1, "colour": "blue"}', Line)
    with pytest.raises(PayloadTypeError, match="Object missing required field `sku`"):
        CONVERTER.decode_args('[{"quantity": 1}]', [Line])
    with pytest.raises(PayloadTypeError, match="Invalid RFC3339"):
        CONVERTER.decode('"yesterday"', datetime)
    with pytest.raises(PayloadTypeError, match="as Customer: .*valid datetime"):
        CONVERTER.decode('{"name": "Ada", "since": "soon"}', Customer)


def test_a_hint_with_no_json_rule_is_a_clear_error():
    class Opaque:
        pass

    with pytest.raises(PayloadTypeError, match="no rule to build a .*Opaque from JSON; supported: dataclasses"):
        CONVERTER.decode("{}", Opaque)


def test_decode_errors_are_value_errors_so_an_attempt_fails_not_the_worker():
    assert issubclass(PayloadTypeError, PayloadEncodingError) and issubclass(PayloadTypeError, ValueError)


def test_call_types_reads_annotations_and_skips_what_it_cannot_resolve():
    def activity(order: Order, count: int, *rest: str, flag: bool = False) -> list[Line]:
        raise NotImplementedError

    def forward(item: "NotDefinedAnywhere", n: int) -> None:  # noqa: F821 - unresolvable on purpose
        raise NotImplementedError

    class Workflow:
        async def run(self, order: Order) -> Order:
            raise NotImplementedError

    assert call_types(activity) == ((Order, int), list[Line])
    assert call_types(forward) == ((None, int), None)
    assert call_types(Workflow.run, skip_self=True) == ((Order,), Order)
    assert call_types(lambda a, b: None) == ((None, None), None)
