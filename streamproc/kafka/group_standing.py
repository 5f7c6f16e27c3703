"""Where a consumer's membership of its group stands, from librdkafka's own statistics.

After repeated broker restarts, or a broker that stalled and went on, a consumer was seen
never getting back into its group: its requests to the group coordinator stayed queued on
a connection that was never re-established ("GroupCoordinator: Timed out 0 in-flight, 0
retry-queued, N out-queue", or ApiVersionRequest timing out on it), and a new
subscription queued behind them. It polled on without error, assigned nothing. Nothing
fails in such a consumer, so only its statistics (`cgrp.state`, `cgrp.join_state`) show
it; task workers and the engine both watch them and replace a consumer left out too long.
"""

from __future__ import annotations

import json


class GroupStanding:
    """Where a consumer's group membership stands, from its latest statistics."""

    def __init__(self) -> None:
        self.state: str | None = None
        self.join_state: str | None = None
        self.assignment_size = 0
        #: monotonic time since when the consumer is neither settled nor assigned anything
        self.unsettled_since: float | None = None

    def on_stats(self, stats_json: str) -> None:
        try:
            cgrp = json.loads(stats_json).get("cgrp") or {}
        except ValueError:
            return
        self.state, self.join_state = cgrp.get("state"), cgrp.get("join_state")
        self.assignment_size = cgrp.get("assignment_size") or 0

    def settled(self) -> bool:
        """In the group, no rebalance under way (an assignment may still be empty)."""
        return self.state == "up" and self.join_state == "steady"

    def left_out_for(self, now: float, holding: bool | None = None) -> float:
        """Seconds the consumer has been out of its group (neither settled nor holding a
        partition) as of `now`; 0 while it is in. `holding`: whether it holds a partition,
        when the caller knows it first hand (`consumer.assignment()`; the statistics lag it
        by up to their interval)."""
        if holding is None:
            holding = bool(self.assignment_size)
        if self.settled() or holding:
            self.unsettled_since = None
            return 0.0
        if self.unsettled_since is None:
            self.unsettled_since = now
        return now - self.unsettled_since

    def describe(self) -> dict:
        return {"group_state": self.state, "join_state": self.join_state}
