"""FarmHash Fingerprint32 in pure Python, for machines where ``pyfarmhash`` has no wheel.

Schedule jitter must hash exactly as Temporal does (Go's ``farm.Fingerprint32``).
``pyfarmhash`` (Google's C++ code) is used where it installs; this port, written from
the algorithm's description (farmhash-mk ``Hash32``: Murmur3-style mixing of 4-byte
little-endian words, with separate paths for 0-4, 5-12, 13-24 and longer inputs), is the
fallback and is tested against it bit for bit.
"""

from __future__ import annotations

__all__ = ["fingerprint32"]

_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593


def _rotate(value: int, shift: int) -> int:
    return value if shift == 0 else ((value >> shift) | (value << (32 - shift))) & _MASK


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    return h ^ (h >> 16)


def _mur(a: int, h: int) -> int:
    a = (_rotate((a * _C1) & _MASK, 17) * _C2) & _MASK
    h = _rotate(h ^ a, 19)
    return (h * 5 + 0xE6546B64) & _MASK


def _word(data: bytes, at: int) -> int:
    return int.from_bytes(data[at:at + 4], "little")


def _short(data: bytes) -> int:
    length = len(data)
    if length <= 4:
        b, c = 0, 9
        for byte in data:
            signed = byte - 256 if byte > 127 else byte  # C's signed char
            b = (b * _C1 + signed) & _MASK
            c ^= b
        return _fmix(_mur(b, _mur(length, c)))
    if length <= 12:
        a = (length + _word(data, 0)) & _MASK
        b = (length * 5 + _word(data, length - 4)) & _MASK
        c = (9 + _word(data, (length >> 1) & 4)) & _MASK
        return _fmix(_mur(c, _mur(b, _mur(a, length * 5))))
    a = _word(data, (length >> 1) - 4)
    b = _word(data, 4)
    c = _word(data, length - 8)
    d = _word(data, length >> 1)
    e = _word(data, 0)
    f = _word(data, length - 4)
    h = (d * _C1 + length) & _MASK
    a = (_rotate(a, 12) + f) & _MASK
    h = (_mur(c, h) + a) & _MASK
    a = (_rotate(a, 3) + c) & _MASK
    h = (_mur(e, h) + a) & _MASK
    a = (_rotate((a + f) & _MASK, 12) + d) & _MASK
    h = (_mur(b, h) + a) & _MASK
    return _fmix(h)


def _scrambled(data: bytes, at: int) -> int:
    return (_rotate((_word(data, at) * _C1) & _MASK, 17) * _C2) & _MASK


def fingerprint32(data: bytes) -> int:
    """Google FarmHash ``Fingerprint32`` of ``data`` (stable across platforms and versions)."""
    length = len(data)
    if length <= 24:
        return _short(data)
    h, g = length, (_C1 * length) & _MASK
    f = g
    h = (_rotate(h ^ _scrambled(data, length - 4), 19) * 5 + 0xE6546B64) & _MASK
    h = (_rotate(h ^ _scrambled(data, length - 16), 19) * 5 + 0xE6546B64) & _MASK
    g = (_rotate(g ^ _scrambled(data, length - 8), 19) * 5 + 0xE6546B64) & _MASK
    g = (_rotate(g ^ _scrambled(data, length - 12), 19) * 5 + 0xE6546B64) & _MASK
    f = (_rotate((f + _scrambled(data, length - 20)) & _MASK, 19) + 113) & _MASK
    at = 0
    for _ in range((length - 1) // 20):
        a, b, c, d, e = (_word(data, at + k) for k in (0, 4, 8, 12, 16))
        h = (h + a) & _MASK
        g = (g + b) & _MASK
        f = (f + c) & _MASK
        h = (_mur(d, h) + e) & _MASK
        g = (_mur(c, g) + a) & _MASK
        f = (_mur((b + e * _C1) & _MASK, f) + d) & _MASK
        f = (f + g) & _MASK
        g = (g + f) & _MASK
        at += 20
    g = (_rotate((_rotate(g, 11) * _C1) & _MASK, 17) * _C1) & _MASK
    f = (_rotate((_rotate(f, 11) * _C1) & _MASK, 17) * _C1) & _MASK
    h = (_rotate((h + g) & _MASK, 19) * 5 + 0xE6546B64) & _MASK
    h = (_rotate(h, 17) * _C1) & _MASK
    h = (_rotate((h + f) & _MASK, 19) * 5 + 0xE6546B64) & _MASK
    return (_rotate(h, 17) * _C1) & _MASK
