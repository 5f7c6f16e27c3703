"""Task tokens: the bytes that name one attempt of one activity (``activity.info().task_token``).

An activity that completes asynchronously hands its token to whatever finishes the work;
``client.get_async_activity_handle(task_token=...)`` answers for that attempt with it.
Temporal's tokens are opaque protobuf; ours are compact JSON, so that a program in any
language can make and read them: the namespace (a token is refused by a client of another
one), the activity's key (which encodes its partition) and the attempt, plus the
activity id for messages. An answer by token is for that attempt only: once it timed out
or was retried, the engine refuses it.
"""

from __future__ import annotations

import dataclasses

import orjson

__all__ = ["TaskToken"]

_VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class TaskToken:
    namespace: str
    activity_key: int
    attempt: int
    activity_id: str = ""

    def encode(self) -> bytes:
        return orjson.dumps({"v": _VERSION, "ns": self.namespace, "key": self.activity_key,
                             "attempt": self.attempt, "id": self.activity_id})

    @classmethod
    def decode(cls, token: bytes) -> TaskToken:
        """The token's fields; ValueError saying what is wrong with bytes that are not one."""
        if not isinstance(token, (bytes, bytearray, memoryview)):
            raise TypeError(f"task_token must be bytes (activity.info().task_token), got {type(token).__name__}")
        try:
            doc = orjson.loads(bytes(token))
            if doc["v"] != _VERSION:
                raise ValueError(f"version {doc['v']!r}, expected {_VERSION}")
            parsed = cls(doc["ns"], doc["key"], doc["attempt"], doc.get("id", ""))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a streamproc task token ({_problem(exc)}): {bytes(token)[:40]!r}") from None
        if not (isinstance(parsed.activity_key, int) and parsed.activity_key >= 0
                and isinstance(parsed.attempt, int) and parsed.attempt >= 1 and isinstance(parsed.namespace, str)):
            raise ValueError(f"not a streamproc task token (bad key or attempt): {bytes(token)[:40]!r}")
        return parsed


def _problem(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no {exc.args[0]!r} field"
    if isinstance(exc, orjson.JSONDecodeError):
        return "not JSON"
    return str(exc) or type(exc).__name__
