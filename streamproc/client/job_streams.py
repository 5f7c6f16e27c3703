"""The job stream commands of `Client`: what a push worker (`worker/job_streams.py`) sends to
keep its stream on each engine partition.

A stream lives on one partition, so each command names the partition it is for (key -1:
it is about no job). Each carries a request id and the worker's replies partition: the
engine answers there (REGISTERED, RENEWED, UNREGISTERED, or a rejection), and pushes the
jobs it activates for the stream there too. Sending does not wait for the answer; the
caller registers for it with its `ReplyListener` before sending.
"""

from __future__ import annotations

from typing import Any

from streamproc.protocol.records import JobStreamIntent, Record, ValueType


class JobStreamOperations:
    """The job stream commands of `Client` (it provides `send`)."""

    def register_job_stream(self, partition: int, *, queue: str, stream_id: str, worker: str, credits: int,
                            lease_ms: int, request_id: str, reply_partition: int) -> None:
        """Ask `partition` to push jobs of `queue` to `reply_partition`, up to `credits`
        (>= 1) unfinished at once, until `lease_ms` passed without a RENEW."""
        self._send_stream_command(JobStreamIntent.REGISTER, partition, request_id, reply_partition, queue=queue,
                                  stream_id=stream_id, worker=worker, credits=credits, lease_ms=lease_ms)

    def renew_job_stream(self, partition: int, *, queue: str, stream_id: str, worker: str, credits: int,
                         lease_ms: int, request_id: str, reply_partition: int) -> None:
        """Extend the lease by `lease_ms` from now and set the credits (0: push nothing for
        now). Rejected NOT_FOUND if the partition no longer knows the stream."""
        self._send_stream_command(JobStreamIntent.RENEW, partition, request_id, reply_partition, queue=queue,
                                  stream_id=stream_id, worker=worker, credits=credits, lease_ms=lease_ms)

    def unregister_job_stream(self, partition: int, *, queue: str, stream_id: str, request_id: str,
                              reply_partition: int) -> None:
        """End the stream on `partition`: nothing more is pushed to it; the jobs pushed and
        not finished keep their deadlines."""
        self._send_stream_command(JobStreamIntent.UNREGISTER, partition, request_id, reply_partition, queue=queue,
                                  stream_id=stream_id)

    def _send_stream_command(self, intent: str, partition: int, request_id: str, reply_partition: int,
                             **value: Any) -> None:
        record = Record.command(ValueType.JOB_STREAM, intent, value, request_id=request_id,
                                reply_partition=reply_partition)
        # urgent: the worker waits on the answer (a REGISTER held back is a push delayed).
        self.send(record, partition, urgent=True)
