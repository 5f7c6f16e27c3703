"""What processing a command produces, besides state writes: follow-up records by destination."""

from __future__ import annotations

import dataclasses
from typing import Any

from streamproc.protocol import codec, command_batches
from streamproc.protocol.records import COMMAND, EVENT, Record, RecordType


@dataclasses.dataclass(slots=True)
class Output:
    """Follow-up records of a batch, in order; the shell produces them in one transaction."""

    events: list[Record] = dataclasses.field(default_factory=list)     # -> events topic
    commands: list[Record] = dataclasses.field(default_factory=list)   # -> commands topic
    tasks: list[tuple[str, Record]] = dataclasses.field(default_factory=list)  # -> tasks.<queue>
    replies: list[tuple[int, Record]] = dataclasses.field(default_factory=list)  # -> replies[p]

    def __len__(self) -> int:
        return len(self.events) + len(self.commands) + len(self.tasks) + len(self.replies)

    def clear(self) -> None:
        self.events.clear()
        self.commands.clear()
        self.tasks.clear()
        self.replies.clear()


class RecordWriter:
    """Writes the follow-ups of the command being processed, stamped with its position and time.

    A command's records are kept apart until the command is accepted or discarded, like
    its state writes, so a processor that raises half-way leaves nothing behind.
    """

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self._pending = Output()
        self._command: Record | None = None
        self._position = -1
        self.now_ms = 0

    def begin(self, command: Record | None, position: int, now_ms: int) -> None:
        self._command = command
        self._position = position
        self.now_ms = now_ms
        self._pending.clear()

    def _stamp(self, record: Record) -> Record:
        record.partition_id = self.partition
        record.source_position = self._position
        record.timestamp_ms = self.now_ms
        if self._command is not None and record.request_id is None:
            record.request_id = self._command.request_id
        return record

    def event(self, value_type: str, intent: str, key: int, value: dict[str, Any],
              reply: bool = True) -> None:
        """An event: on the events topic, and to the caller if it asked for a reply (and
        `reply`: a workflow's history events are facts, its caller gets one answer)."""
        record = self._stamp(Record(EVENT, value_type, intent, dict(value), key=key))
        self._pending.events.append(record)
        if reply:
            self._reply_with(record)

    def reply(self, value_type: str, intent: str, key: int, value: dict[str, Any]) -> None:
        """An answer for the caller only (e.g. a heartbeat's), not a fact for the events topic;
        nothing is built when the command set no reply partition."""
        if self.caller_listens:
            record = self._stamp(Record(EVENT, value_type, intent, dict(value), key=key))
            self._pending.replies.append((self._command.reply_partition, record))

    def answer(self, reply_partition: int, request_id: str, value_type: str, intent: str, key: int,
               value: dict[str, Any]) -> None:
        """An answer for a caller of an earlier command that waits for it (an update's
        stage): to that caller's reply partition, under its request id."""
        if reply_partition >= 0:
            record = self._stamp(Record(EVENT, value_type, intent, dict(value), key=key,
                                        request_id=request_id))
            self._pending.replies.append((reply_partition, record))

    @property
    def caller_listens(self) -> bool:
        """Whether the command being processed asked for replies (set a reply partition)."""
        return self._command is not None and self._command.reply_partition >= 0

    def _reply_with(self, record: Record) -> None:
        if self.caller_listens:
            self._pending.replies.append((self._command.reply_partition, record))

    def reject(self, command: Record, rejection_type: str, reason: str,
               value: dict[str, Any] | None = None) -> None:
        """A rejection repeats the command (or `value` instead) with the reason."""
        record = Record(RecordType.COMMAND_REJECTION, command.value_type, command.intent,
                        value if value is not None else command.value, key=command.key,
                        rejection_type=str(rejection_type), rejection_reason=reason)
        self._pending.events.append(self._stamp(record))
        self._reply_with(record)

    def command(self, value_type: str, intent: str, key: int, value: dict[str, Any],
                request_id: str | None = None) -> None:
        """A command for the log, committed with this one: a WORKFLOW command goes to the
        partition of its `workflow_id` (another partition's engine, or this one)."""
        self._pending.commands.append(self._stamp(Record(COMMAND, value_type, intent, dict(value), key=key,
                                                         request_id=request_id)))

    def task(self, queue: str, key: int, value: dict[str, Any], value_type: str = "JOB",
             intent: str = "ACTIVATABLE", reply_partition: int = -1, request_id: str | None = None) -> None:
        """A record for the workers of `queue`, on topic tasks.<queue> (workflow-tasks.<queue>
        for value type WORKFLOW); `reply_partition` and `request_id`: whom its worker
        answers (default: the command's caller)."""
        record = Record(EVENT, value_type, intent, dict(value), key=key, reply_partition=reply_partition,
                        request_id=request_id)
        self._pending.tasks.append((queue, self._stamp(record)))

    def encode_pending(self) -> None:
        """Encode the command's records now, so a record that cannot be encoded fails the
        command that wrote it (and becomes its rejection), not the partition's transaction.
        A command that may travel in a batch is made its batch part instead (JSON, much
        cheaper), unless it must travel alone (`protocol/command_batches.py`)."""
        for record in self._pending_records():
            if not (command_batches.packable(record) and command_batches.part_of(record) is not None):
                record.encoded = codec.encode(record)

    def encode_pending_or_strip(self) -> None:
        """For rejections: if the repeated command cannot be encoded, drop its value."""
        try:
            self.encode_pending()
        except Exception:
            for record in self._pending_records():
                record.value = None
            self.encode_pending()

    def _pending_records(self):
        p = self._pending
        yield from p.events
        yield from p.commands
        for _, record in p.tasks:
            yield record
        for _, record in p.replies:
            if record.encoded is None:
                yield record

    def accept_into(self, output: Output) -> None:
        output.events.extend(self._pending.events)
        output.commands.extend(self._pending.commands)
        output.tasks.extend(self._pending.tasks)
        output.replies.extend(self._pending.replies)
        self._pending.clear()

    def discard(self) -> None:
        self._pending.clear()
