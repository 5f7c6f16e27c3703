"""A custom payload converter for tests: Decimal money as "EUR 12.50" text, which JSON
alone would lose, tagged "text/money"."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from streamproc.converter import DataConverter, Payload


@dataclass(frozen=True)
class Money:
    amount: Decimal
    currency: str


class MoneyConverter:
    encoding = "text/money"

    def to_payload(self, value: Any) -> Payload | None:
        if not isinstance(value, Money):
            return None
        return Payload(self.encoding, f"{value.currency} {value.amount}".encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        currency, amount = payload.data.decode().split(" ")
        return Money(Decimal(amount), currency)


#: The defaults with money in front, as a user would configure it.
WITH_MONEY = DataConverter([MoneyConverter(), *DataConverter.default().converters])
