"""The base of the enums that carry Temporal's numbers and protobuf names."""

from __future__ import annotations

import re
from enum import IntEnum

__all__ = ["TemporalEnum"]


class TemporalEnum(IntEnum):
    """An enum with Temporal's numbers. Its members' protobuf names follow the protobuf
    style Temporal's API uses: the member name after the enum's name in upper snake case
    (``TimeoutType.START_TO_CLOSE.proto_name == "TIMEOUT_TYPE_START_TO_CLOSE"``)."""

    @property
    def proto_name(self) -> str:
        """The Temporal API name, e.g. ``TIMEOUT_TYPE_START_TO_CLOSE``."""
        return f"{_upper_snake(type(self).__name__)}_{self.name}"


def _upper_snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).upper()
