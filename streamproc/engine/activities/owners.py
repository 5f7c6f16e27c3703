"""Who an activity reports to: its owner, injected, so that the activity machinery (four
timeouts, retries, heartbeats) never reaches up into the layer that scheduled it.

- A **standalone** activity, scheduled by a client, reports on its own key: its
  ActivityTaskStarted (written only when the attempt closes, as Temporal does) and its
  close event; a client may request its cancellation.
- An activity **scheduled by a workflow run** reports into the run's history, and only
  the run may cancel it (`engine/workflows/activities.py`).

The owner is named in the activity's meta (`owner_kind`); `engine/partition.py` wires one
owner per kind into the processing context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from streamproc.engine.activities.values import event_value
from streamproc.protocol.failures import failure_to_record
from streamproc.protocol.records import ActivityIntent, ValueType
from streamproc.semantics import ActivityState
from streamproc.state.activities import ActivityMeta

if TYPE_CHECKING:
    from streamproc.engine.processing import ProcessingContext

#: The kinds of owner, as `owner_kind` reads them from an activity's meta.
STANDALONE = "standalone"
WORKFLOW = "workflow"


def owner_kind(meta: ActivityMeta) -> str:
    return WORKFLOW if meta.workflow is not None else STANDALONE


class ActivityOwner(Protocol):
    def cancel_refused(self, key: int) -> str | None:
        """Why a client may not request the cancellation of activity `key`; None if it may."""

    def activity_closed(self, ctx: ProcessingContext, key: int, meta: ActivityMeta, state: ActivityState,
                        last_failure: Any, close_intent: str, started: bool, fields: dict[str, Any],
                        hand_back_after: int = 0, task_answer: str | None = None) -> None:
        """The activity closed (`close_intent`: COMPLETED, FAILED, TIMED_OUT, CANCELED) with
        `fields` for its close event; `started`: whether the closing attempt had started.
        `hand_back_after`: the answering worker asks for what follows (its owner's next
        workflow task) as a reply; 0 if it does not. `task_answer`: with it, that task's
        answer, to ride along with the close when the owner's run is where it assumed."""


class StandaloneOwner:
    """The client that scheduled the activity: it reads the events on the activity's key."""

    def cancel_refused(self, key: int) -> str | None:
        return None

    def activity_closed(self, ctx: ProcessingContext, key: int, meta: ActivityMeta, state: ActivityState,
                        last_failure: Any, close_intent: str, started: bool, fields: dict[str, Any],
                        hand_back_after: int = 0, task_answer: str | None = None) -> None:
        started_event_id = meta.take_event_id() if started else 0
        if started:
            ctx.out.event(ValueType.ACTIVITY_TASK, ActivityIntent.STARTED, key, event_value(
                meta, state, event_id=started_event_id, last_failure=failure_to_record(last_failure)))
        close_id = meta.take_event_id()
        ctx.out.event(ValueType.ACTIVITY_TASK, close_intent, key, event_value(
            meta, state, event_id=close_id, started_event_id=started_event_id, **fields))
