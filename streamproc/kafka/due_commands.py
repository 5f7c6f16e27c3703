"""Step 3 of the engine's batch (`Engine._step`): the due commands of the owned partitions.

The due-date checkers read committed state; what is due now is processed in the
transaction that also writes it to the log, so a timeout costs one commit, not a round
trip through the commands topic (read back later, it is an echo: `echoes.py`).
"""

from __future__ import annotations

from streamproc.metrics.batch_tally import BatchTally
from streamproc.protocol import codec, command_batches
from streamproc.protocol.records import Record


def process_due(partitions, now_ms: int, touched: set[int],
                tally: BatchTally | None) -> tuple[list[tuple[int, Record]], int]:
    """Process every command due at `now_ms` on its partition (adding it to `touched`);
    answers them with their partitions, and how many commands that was (a BATCH's parts
    counted)."""
    due = [(part.id, cmd) for part in partitions.values()
           if part.checker.wait_ms(now_ms) == 0 for cmd in part.checker.collect(now_ms)]
    processed = 0
    for pid, cmd in due:
        cmd.encoded = codec.encode(cmd)  # for the log; a command that cannot be encoded fails here
        part = partitions[pid]
        part.processor.process_command(cmd, -1)
        touched.add(pid)
        processed += len(command_batches.commands_in(cmd))
        if tally is not None:
            for one in command_batches.commands_in(cmd):  # a batch's commands one by one
                due_ms = part.checker.due_ms_of(one)
                tally.due(pid, one, None if due_ms is None else now_ms - due_ms)
    return due, processed
