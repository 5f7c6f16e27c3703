"""Big-endian key codecs: byte order equals numeric order, so range scans come out in time order."""

from __future__ import annotations

import struct

_U64 = struct.Struct(">Q")
_TIME_KEY = struct.Struct(">QQ")


def u64(value: int) -> bytes:
    return _U64.pack(value)


def read_u64(data: bytes) -> int:
    return _U64.unpack(data)[0]


def time_key(at_ms: int, key: int) -> bytes:
    """(time, entity key): sorts by time first, then by key."""
    return _TIME_KEY.pack(at_ms, key)


def read_time_key(data: bytes) -> tuple[int, int]:
    at_ms, key = _TIME_KEY.unpack(data)
    return at_ms, key


def time_upper_bound(before_ms: int) -> bytes:
    """Exclusive upper bound of a scan that yields every time key strictly before `before_ms`."""
    return _U64.pack(max(before_ms, 0))
