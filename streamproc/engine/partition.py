"""The stream processor of one partition: decode, dispatch, and keep bad input from stopping it.

No Kafka here: it takes the bytes of a command and its offset, and leaves follow-up
records in `output` and state writes in `writes`, for the shell to commit. Every
command gets an answer: its events, or a rejection with a reason.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from streamproc.clock import Clock
from streamproc.engine.activities.owners import STANDALONE, WORKFLOW, StandaloneOwner
from streamproc.engine.activities.processors import ACTIVITY_PROCESSORS
from streamproc.engine.processing import Limits, ProcessingContext, Processor
from streamproc.engine.jobs.processors import JOB_PROCESSORS
from streamproc.engine.jobs.streams import JOB_STREAM_PROCESSORS
from streamproc.engine.output import Output, RecordWriter
from streamproc.engine.workflows.activities import WorkflowActivityOwner
from streamproc.engine.workflows.ride_along import deliver_with_answer
from streamproc.engine.workflows.activity_ids import addressed_by_ids
from streamproc.engine.schedules.processors import SCHEDULE_PROCESSORS
from streamproc.engine.workflows.processors import WORKFLOW_PROCESSORS
from streamproc.engine.workflows.runs import HistoryLimitExceeded, terminate_at_history_limit
from streamproc.protocol import codec, command_batches
from streamproc.protocol.records import COMMAND, ActivityIntent, Record, RecordType, RejectionType, ValueType
from streamproc.state.activities import Activities
from streamproc.state.db import PartitionDb, PendingWrites
from streamproc.state.history import History
from streamproc.state.incidents import Incidents
from streamproc.state.jobs import Jobs
from streamproc.state.keygen import KeyGenerator
from streamproc.state.schedules import Schedules
from streamproc.state.workflow_timers import WorkflowTimers
from streamproc.state.workflows import Workflows

log = structlog.get_logger("streamproc.engine")

#: Who each kind of activity reports to: a client, or the workflow run that scheduled it.
ACTIVITY_OWNERS = {STANDALONE: StandaloneOwner(), WORKFLOW: WorkflowActivityOwner(deliver_with_answer)}

PROCESSORS: dict[tuple[str, str], Processor] = {
    **{(ValueType.JOB, intent): proc for intent, proc in JOB_PROCESSORS.items()},
    **{(ValueType.JOB_STREAM, intent): proc for intent, proc in JOB_STREAM_PROCESSORS.items()},
    **{(ValueType.ACTIVITY_TASK, intent): proc for intent, proc in ACTIVITY_PROCESSORS.items()},
    # An asynchronous completion may name the workflow and activity ids instead of the key.
    **{(ValueType.ACTIVITY_TASK, intent): addressed_by_ids(ACTIVITY_PROCESSORS[intent])
       for intent in (ActivityIntent.COMPLETE, ActivityIntent.FAIL, ActivityIntent.HEARTBEAT,
                      ActivityIntent.REPORT_CANCELED)},
    **{(ValueType.WORKFLOW, intent): proc for intent, proc in WORKFLOW_PROCESSORS.items()},
    **{(ValueType.SCHEDULE, intent): proc for intent, proc in SCHEDULE_PROCESSORS.items()},
}


class PartitionProcessor:
    def __init__(self, partition: int, db: PartitionDb, clock: Clock,
                 limits: Limits = Limits(), namespace: str = "streamproc") -> None:
        self.partition = partition
        self.db = db
        self.clock = clock
        self.limits = limits
        self.writes = PendingWrites(db)
        self.output = Output()
        self._writer = RecordWriter(partition)
        self._ctx = ProcessingContext(jobs=Jobs(self.writes), incidents=Incidents(self.writes),
                                      keys=KeyGenerator(self.writes, partition),
                                      out=self._writer, limits=limits,
                                      activities=Activities(self.writes),
                                      workflows=Workflows(self.writes), history=History(self.writes),
                                      workflow_timers=WorkflowTimers(self.writes), writes=self.writes,
                                      activity_owners=ACTIVITY_OWNERS, schedules=Schedules(self.writes),
                                      namespace=namespace)
        #: Called with each processed command (accepted or rejected): the checker's hook.
        self.on_processed = None

    def process(self, data: bytes | None, headers: list | None, position: int) -> Record | None:
        """Process one command from the log; returns it decoded (None if undecodable)."""
        now_ms = self.clock.now_ms()
        size = len(data) if data else 0
        if size > self.limits.max_command_bytes:
            self._reject_raw(position, now_ms, RejectionType.EXCEEDED_SIZE,
                             f"command is {size} bytes, more than the limit of "
                             f"{self.limits.max_command_bytes}")
            return None
        try:
            cmd = codec.decode(data, headers)
        except codec.DecodeError as exc:
            self._reject_raw(position, now_ms, RejectionType.UNDECODABLE, f"cannot decode command: {exc}",
                             exc.request_id, exc.reply_partition)
            return None
        self.process_command(cmd, position, now_ms)
        return cmd

    def process_command(self, cmd: Record, position: int, now_ms: int | None = None,
                        after_each: Callable[[], object] | None = None) -> None:
        """Process a command already decoded: one the due-date checker wrote, say (its
        bytes go to the log too, but decoding them again would only cost time).
        `after_each` is called once the command is processed, or after each command of a
        BATCH (the engine relays what each wrote before the next: `kafka/due_commands.py`)."""
        if now_ms is None:
            now_ms = self.clock.now_ms()
        if command_batches.is_batch(cmd):
            self._process_batch(cmd, position, now_ms, after_each)
            return
        self._writer.begin(cmd, position, now_ms)
        if cmd.record_type is not COMMAND:
            self._writer.reject(cmd, RejectionType.UNKNOWN_COMMAND,
                                f"expected a COMMAND on the commands topic, got a {cmd.record_type}")
            self._writer.encode_pending_or_strip()
        else:
            processor = PROCESSORS.get((cmd.value_type, cmd.intent))
            if processor is None:
                self._writer.reject(cmd, RejectionType.UNKNOWN_COMMAND,
                                    f"no processor for {codec.clipped(cmd.value_type)} {codec.clipped(cmd.intent)}")
                self._writer.encode_pending_or_strip()
            else:
                self._run(processor, cmd, position, now_ms)
        self._writer.accept_into(self.output)
        self.writes.accept()
        if self.on_processed is not None:
            self.on_processed(cmd)
        if after_each is not None:
            after_each()

    def _process_batch(self, batch: Record, position: int, now_ms: int,
                       after_each: Callable[[], object] | None = None) -> None:
        """Each command of a BATCH as the command it is, at the batch's position (see
        `protocol/command_batches.py`); a batch whose parts cannot be read is rejected."""
        try:
            parts = command_batches.unpack(batch)
        except command_batches.BatchError as exc:
            self._writer.begin(batch, position, now_ms)
            self._writer.reject(batch, RejectionType.INVALID_ARGUMENT, str(exc))
            self._writer.encode_pending_or_strip()
            self._writer.accept_into(self.output)
            return
        batch.parts = parts  # for whoever counts the commands processed
        for part in parts:  # never a BATCH: `unpack` refuses nested ones
            self.process_command(part, position, after_each=after_each)  # at its own time, as if it came alone

    def _run(self, processor: Processor, cmd: Record, position: int, now_ms: int) -> None:
        cmd.value = codec.with_defaults(cmd.value_type, cmd.value)
        try:
            processor(cmd, self._ctx)
            self._writer.encode_pending()
        except HistoryLimitExceeded as exceeded:
            # Temporal's rule: the command's changes are dropped, the run is terminated.
            self.writes.discard()
            self._writer.begin(cmd, position, now_ms)
            terminate_at_history_limit(self._ctx, exceeded)
            self._writer.reject(cmd, RejectionType.INVALID_ARGUMENT, exceeded.reason)
            self._writer.encode_pending_or_strip()
        except Exception as exc:  # a bug must cost one command, not the partition
            log.exception("processor_failed", partition=self.partition, position=position,
                          value_type=cmd.value_type, intent=cmd.intent, key=cmd.key)
            self.writes.discard()
            self._writer.begin(cmd, position, now_ms)
            self._writer.reject(cmd, RejectionType.PROCESSING_ERROR,
                                f"processing failed: {type(exc).__name__}: {exc}")
            self._writer.encode_pending_or_strip()

    def _reject_raw(self, position: int, now_ms: int, rejection_type: str, reason: str,
                    request_id: str | None = None, reply_partition: int = -1) -> None:
        """Reject bytes that are no command; the caller's request id and reply partition,
        when they could be read, make it hear of it."""
        placeholder = Record(RecordType.COMMAND, ValueType.UNKNOWN, "UNKNOWN", request_id=request_id,
                             reply_partition=reply_partition)
        self._writer.begin(placeholder, position, now_ms)
        self._writer.reject(placeholder, rejection_type, reason)
        self._writer.encode_pending()
        self._writer.accept_into(self.output)
        log.warning("command_rejected", partition=self.partition, position=position,
                    rejection_type=rejection_type, reason=reason)

    def reset_batch(self) -> None:
        """Forget the batch's writes and output (after an aborted transaction)."""
        self.writes.clear()
        self.output.clear()
