"""What an engine's partitions wait for when it is quiet: the time-skipping test
environment asks it before it moves its clock (`streamproc.due.waiting` says when a
partition only waits)."""

from __future__ import annotations

from confluent_kafka import Consumer

from streamproc.due.waiting import Outlook, busy, combined
from streamproc.kafka.batching import read_to_the_end


def quiet_outlook(partitions: dict, restored: bool, consumer: Consumer, commands_topic: str) -> Outlook | None:
    """What the owned `partitions`' committed state waits for, or None while the commands
    topic holds records the engine has not read (a client's command, or one the engine
    wrote for another partition) or not every partition is assigned and `restored`."""
    if not partitions or not restored:
        return None
    outlook = combined([Outlook(busy(part.db), part.checker.next_wait_ms) for part in partitions.values()])
    if outlook.busy:  # no need to ask the broker
        return outlook
    return outlook if read_to_the_end(consumer, commands_topic, partitions) else None
