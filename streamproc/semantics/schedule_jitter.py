"""Deterministic schedule jitter (SEMANTICS.md 8.4 step 4).

Temporal hashes the nominal time, encoded as Go's ``time.Time.MarshalBinary`` does,
followed by the seed ``<namespaceId>-<scheduleId>``, with FarmHash Fingerprint32, and
scales the 32-bit hash into ``[0, max_jitter)`` milliseconds. Reproducing the bytes and
the hash exactly gives the same jittered times as a Temporal server.

FarmHash comes from ``pyfarmhash`` (Google's C++ FarmHash, whose ``fingerprint32`` is
the stable Fingerprint32) where it installs, else from the pure-Python ``farmhash32``;
both reproduce Temporal's vectors bit for bit.
"""

from __future__ import annotations

import struct

try:
    from farmhash import fingerprint32
except ImportError:  # no wheel here: the pure-Python port (~20 us a hash instead of 0.2)
    from streamproc.semantics.farmhash32 import fingerprint32

__all__ = ["go_time_binary", "jitter_ms"]

#: Seconds from 0001-01-01 (Go's internal epoch) to 1970-01-01.
_GO_UNIX_TO_INTERNAL_S = 62_135_596_800
_UINT32_MAX = 2**32 - 1


def go_time_binary(unix_s: int) -> bytes:
    """Go's ``MarshalBinary`` of a whole-second UTC time: version 1, seconds since year 1,
    nanoseconds, and offset minutes -1 (the UTC marker)."""
    return struct.pack(">bqih", 1, unix_s + _GO_UNIX_TO_INTERNAL_S, 0, -1)


def jitter_ms(seed: str, nominal_s: int, max_jitter_ms: int) -> int:
    """The jitter for one nominal time, in ``[0, max_jitter_ms)`` (0 when the cap is 0)."""
    cap = min(max(max_jitter_ms, 0), _UINT32_MAX)
    if cap == 0:
        return 0
    fingerprint = fingerprint32(go_time_binary(nominal_s) + seed.encode())
    return (fingerprint * cap) >> 32
