"""Incidents of a partition: jobs that ran out of retries and wait for a person."""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.state.db import PendingWrites
from streamproc.state.families import Family
from streamproc.state.keys import u64

Incident = dict[str, Any]


class Incidents:
    def __init__(self, writes: PendingWrites) -> None:
        self._w = writes

    def get(self, key: int) -> Incident | None:
        raw = self._w.get(Family.INCIDENTS, u64(key))
        return orjson.loads(raw) if raw is not None else None

    def open(self, key: int, incident: Incident) -> None:
        self._w.put(Family.INCIDENTS, u64(key), orjson.dumps(incident))

    def resolve(self, key: int) -> None:
        self._w.delete(Family.INCIDENTS, u64(key))
