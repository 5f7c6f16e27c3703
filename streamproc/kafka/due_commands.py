"""Step 3 of the engine's batch (`Engine._step`): the due commands of the owned partitions.

The due-date checkers read committed state; what is due now is processed in the
transaction that also writes it to the log, so a timeout costs one commit, not a round
trip through the commands topic (read back later, it is an echo: `echoes.py`).

What a due command writes for a partition of this engine is relayed right after it
(`engine/relay.py`, the `after_each` the engine passes): a schedule's START is processed
after its own TRIGGER, not after every TRIGGER of the pass. The transaction commits them
all together, so the last action of a pass is started no sooner; the others no longer
wait for the TRIGGERs after them. The TRIGGER of one schedule and the START of another
one's workflow touch different entities: either order is one the log could have given.
"""

from __future__ import annotations

from collections.abc import Callable

from streamproc.metrics.batch_tally import BatchTally
from streamproc.protocol import codec, command_batches
from streamproc.protocol.records import Record


def collect_due(partitions, now_ms: int) -> list[tuple[int, Record]]:
    """Every command due at `now_ms` (the checkers' TRIGGER batches among them), with its partition."""
    return [(part.id, cmd) for part in partitions.values()
            if part.checker.wait_ms(now_ms) == 0 for cmd in part.checker.collect(now_ms)]


def commands_count(due: list[tuple[int, Record]]) -> int:
    """How many commands `due` holds, a BATCH's parts counted."""
    return sum(len(command_batches.commands_in(cmd)) for _, cmd in due)


def process_due(due: list[tuple[int, Record]], partitions, now_ms: int, touched: set[int],
                tally: BatchTally | None, after_each: Callable[[], object] | None = None) -> None:
    """Process each of `due` (from `collect_due` at `now_ms`) on its partition, adding it to
    `touched` first, and call `after_each` after each command (each part of a BATCH)."""
    for pid, cmd in due:
        cmd.encoded = codec.encode(cmd)  # for the log; a command that cannot be encoded fails here
        part = partitions[pid]
        touched.add(pid)  # before: `after_each` relays what it writes
        part.processor.process_command(cmd, -1, after_each=after_each)
        if tally is not None:
            for one in command_batches.commands_in(cmd):  # a batch's commands one by one
                due_ms = part.checker.due_ms_of(one)
                tally.due(pid, one, None if due_ms is None else now_ms - due_ms)
