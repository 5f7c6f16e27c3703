"""New run ids: the text of a random (version 4) UUID, as `str(uuid.uuid4())` gives it.

Made from 16 random bytes directly: `uuid.UUID`'s constructor and its `str` run a few
dozen lines of Python per id, and a schedule action or a workflow start needs one each.
"""

from __future__ import annotations

import os


def new_run_id() -> str:
    """`str(uuid.uuid4())`: 16 bytes from os.urandom, the version (4) and the RFC 4122
    variant bits set, as 8-4-4-4-12 lowercase hex digits."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
