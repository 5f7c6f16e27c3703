"""Step 1 of the engine's batch (`Engine._step`): the commands read from the log, processed
on their partitions. Processors only stage writes (over the committing batch's) and
follow-ups. Skipped, only their offsets moving: echoes (due and relayed commands the engine
processed in the transaction that wrote them, `echoes.py`) and the commands it wrote through
the log and processed before reading them back (`engine/relay.py`). At most `max_batch`
commands are processed (a BATCH counts its parts): what is left is read again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import Message

from streamproc.engine.relay import Relay
from streamproc.kafka.echoes import is_echo
from streamproc.kafka.engine_stats import EngineStats
from streamproc.metrics.batch_tally import BatchTally
from streamproc.protocol import command_batches


@dataclass(slots=True)
class ReadCommands:
    fresh: list[Message] = field(default_factory=list)  # read, not echoes
    touched: set[int] = field(default_factory=set)  # partitions that processed one
    processed: int = 0  # commands processed, a BATCH's parts counted
    left: list[Message] = field(default_factory=list)  # beyond `max_batch`: to read again


def process_read(commands: list[Message], partitions, relay: Relay, max_batch: int,
                 tally: BatchTally | None, stats: EngineStats) -> ReadCommands:
    read = ReadCommands(fresh=[msg for msg in commands if not is_echo(msg)])
    stats.echoes += len(commands) - len(read.fresh)
    for i, msg in enumerate(read.fresh):
        if read.processed >= max_batch:
            read.left = read.fresh[i:]
            break
        pid = msg.partition()
        processor = partitions[pid].processor
        headers = msg.headers()  # a new list at every call: read once
        if relay.read_back(pid, headers, processor.writes):
            stats.echoes += 1  # processed before it was read back
            continue
        cmd = processor.process(msg.value(), headers, msg.offset())
        read.touched.add(pid)
        read.processed += 1 if cmd is None else len(command_batches.commands_in(cmd))
        if tally is not None:
            tally.command(pid, cmd)
    return read
