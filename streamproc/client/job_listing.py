"""Jobs and incidents as the events topic tells them (``streamproc job list|describe``,
``streamproc incident list``).

Every job event carries the whole JobRecord, its `state` after the event included, so a
job's current state is its last event's; a listing reads every events partition up to its
current end and keeps the last event of each job. It sees what the topic still holds (its
retention), as `workflow list` does.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from streamproc.kafka.batching import close_in_background, messages_to_the_end
from streamproc.kafka.config import consumer_config
from streamproc.protocol import codec
from streamproc.protocol.records import IncidentIntent, JobIntent, Record, RecordType, ValueType

__all__ = ["JobSummary", "IncidentSummary", "summarize_jobs", "summarize_incidents", "read_events"]

#: The state an event that ends a job leaves it in (its record says COMPLETED / CANCELED too).
_CLOSED = {JobIntent.COMPLETED: "COMPLETED", JobIntent.CANCELED: "CANCELED"}


@dataclasses.dataclass
class JobSummary:
    """One job: its queue, where it is, and its last attempt."""

    key: int
    type: str = ""
    state: str = ""
    retries: int = 0
    attempt: int = 0
    worker: str = ""
    error_message: str = ""
    result: str | None = None
    payload: str = ""
    created_ms: int = 0
    updated_ms: int = 0
    last_event: str = ""

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class IncidentSummary:
    """A job out of retries, until UPDATE_RETRIES resolves it."""

    key: int
    job_key: int
    job_type: str
    error_type: str
    error_message: str
    created_ms: int
    resolved_ms: int = 0

    @property
    def open(self) -> bool:
        return not self.resolved_ms

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "open": self.open}


def _events(records: Iterable[Record], value_type: str) -> Iterable[Record]:
    return (r for r in records if r.record_type is RecordType.EVENT and r.value_type == value_type)


def summarize_jobs(records: Iterable[Record]) -> list[JobSummary]:
    """One summary per job seen, newest first."""
    jobs: dict[int, JobSummary] = {}
    for record in _events(records, ValueType.JOB):
        v = record.value or {}
        job = jobs.get(record.key)
        if job is None:
            job = jobs[record.key] = JobSummary(record.key, created_ms=record.timestamp_ms)
        job.type, job.retries, job.attempt = v.get("type", job.type), v.get("retries", 0), v.get("attempt", 0)
        job.worker, job.error_message = v.get("worker") or "", v.get("error_message") or ""
        job.result, job.payload = v.get("result"), v.get("payload") or job.payload
        job.state = _CLOSED.get(record.intent) or v.get("state") or "ACTIVATABLE"
        job.updated_ms, job.last_event = record.timestamp_ms, record.intent
    return sorted(jobs.values(), key=lambda j: (j.created_ms, j.key), reverse=True)


def summarize_incidents(records: Iterable[Record]) -> list[IncidentSummary]:
    """Every incident seen, newest first."""
    incidents: dict[int, IncidentSummary] = {}
    for record in _events(records, ValueType.INCIDENT):
        v = record.value or {}
        if record.intent == IncidentIntent.CREATED:
            incidents[record.key] = IncidentSummary(record.key, v.get("job_key", -1), v.get("job_type", ""),
                                                    v.get("error_type", ""), v.get("error_message", ""),
                                                    record.timestamp_ms)
        elif record.intent == IncidentIntent.RESOLVED and record.key in incidents:
            incidents[record.key].resolved_ms = record.timestamp_ms
    return sorted(incidents.values(), key=lambda i: (i.created_ms, i.key), reverse=True)


def read_events(bootstrap: str, topic: str, partitions: Iterable[int], *, group_prefix: str = "streamproc",
                timeout: float = 30) -> list[Record]:
    """Every record the partitions of the events topic hold now (read_committed, from the
    beginning to each partition's end when asked); TimeoutError if that takes longer."""
    # No group membership and no commits: the group id only satisfies the client.
    consumer = Consumer(consumer_config(bootstrap, f"{group_prefix}.job-listing.{uuid.uuid4().hex}"))
    out: list[Record] = []
    try:
        for partition in partitions:
            consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
            for msg in messages_to_the_end(consumer, topic, partition, timeout):
                try:
                    out.append(codec.decode(msg.value(), msg.headers()))
                except codec.DecodeError:
                    continue  # not ours to judge: the events topic is read by many
    finally:
        close_in_background(consumer).join(10)
    return out
