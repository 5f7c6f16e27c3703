"""Workflow code gets typed values from its annotations, task by task (no broker): the run's
arguments, activity results (by the function's return annotation or `result_type=`),
signal, query and update arguments; a value that does not fit fails the workflow task,
not the run, and a signal that does not fit is dropped."""

from __future__ import annotations

import dataclasses
import enum
from datetime import UTC, datetime, timedelta

from streamproc import activity, workflow
from tests.workflow.history import Run

SECOND = timedelta(seconds=1)


class Size(enum.Enum):
    S = "s"
    L = "l"


@dataclasses.dataclass
class Parcel:
    size: Size
    sent: datetime


@activity.defn
def weigh(parcel: Parcel) -> Parcel:
    raise NotImplementedError  # never run here: the history says what it returned


@workflow.defn
class Shipping:
    def __init__(self) -> None:
        self.seen: list[object] = []

    @workflow.run
    async def run(self, parcel: Parcel) -> list:
        self.seen.append(parcel)
        self.seen.append(await workflow.execute_activity(weigh, parcel, start_to_close_timeout=SECOND))
        self.seen.append(await workflow.execute_activity("weigh", parcel, start_to_close_timeout=SECOND,
                                                         result_type=Parcel))
        self.seen.append(await workflow.execute_activity("weigh", parcel, start_to_close_timeout=SECOND))
        await workflow.wait_condition(lambda: len(self.seen) > 4)
        return [type(v).__name__ for v in self.seen]

    @workflow.signal
    def relabel(self, parcel: Parcel) -> None:
        self.seen.append(parcel)

    @workflow.query
    def has(self, size: Size) -> bool:
        return isinstance(size, Size) and any(getattr(v, "size", None) is size for v in self.seen)


SENT = datetime(2024, 5, 1, tzinfo=UTC)
WIRE = {"size": "l", "sent": SENT.isoformat()}


def test_run_arguments_activity_results_signals_and_queries_are_typed_by_annotations():
    run = Run(Shipping, WIRE)  # what a client in any language would send
    assert run.step()[0]["input"] == '[{"size":"l","sent":"2024-05-01T00:00:00+00:00"}]'
    for activity_id in ("1", "2", "3"):
        run.history.activity_completed(activity_id, WIRE)
        run.history.schedule_task()
        run.step()
    assert run.instance.query("has", '["l"]') == "true"
    run.history.signaled("relabel", [{"size": "s", "sent": SENT.isoformat()}])
    run.history.schedule_task()
    (complete,) = run.step()
    # By annotation, by result_type=, plain JSON for a name without result_type, the signal's.
    assert complete["result"] == '["Parcel","Parcel","Parcel","dict","Parcel"]'
    assert run.replay().commands is not None  # and a fresh replay decodes the same way


def test_a_run_argument_that_does_not_fit_fails_the_task_not_the_run():
    outcome = Run(Shipping, {"size": "xl", "sent": SENT.isoformat()}).activate()
    assert outcome.failed and outcome.cause == "WORKFLOW_WORKER_UNHANDLED_FAILURE"
    assert outcome.failure["type"] == "PayloadTypeError"
    assert "as Parcel: Invalid enum value 'xl' - at `$.size`" in outcome.failure["message"]


def test_an_activity_result_that_does_not_fit_fails_the_task():
    run = Run(Shipping, WIRE)
    run.step()
    run.history.activity_completed("1", {"size": "l"})  # no `sent`
    run.history.schedule_task()
    outcome = run.activate()
    assert outcome.failed and "Object missing required field `sent`" in outcome.failure["message"]


def test_a_signal_whose_arguments_do_not_fit_is_dropped():
    run = Run(Shipping, WIRE)
    run.step()
    run.history.signaled("relabel", [{"size": 3}])
    run.history.activity_completed("1", WIRE)
    run.history.schedule_task()
    (schedule,) = run.step()  # the run went on; the signal never reached its handler
    assert schedule["type"] == "SCHEDULE_ACTIVITY_TASK" and schedule["activity_id"] == "2"
    assert run.instance.query("has", '["s"]') == "false"


@workflow.defn
class Resizing:
    def __init__(self) -> None:
        self.size = Size.S

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.size is Size.L)
        return self.size.value

    @workflow.update
    def resize(self, parcel: Parcel) -> str:
        self.size = parcel.size
        return f"{parcel.size.name} since {parcel.sent:%Y}"


def test_update_arguments_are_typed_and_a_mismatch_is_rejected():
    run = Run(Resizing)
    run.step()
    bad = run.history.send_update("u-1", "resize", [{"size": "big", "sent": SENT.isoformat()}])
    good = run.history.send_update("u-2", "resize", [WIRE])
    run.history.schedule_task()
    commands = run.step([bad, good])
    rejected, accepted, completed, finished = commands
    assert rejected["type"] == "REJECT_UPDATE" and "Invalid enum value 'big'" in rejected["failure"]["message"]
    assert (accepted["type"], completed["result"]) == ("ACCEPT_UPDATE", '"L since 2024"')
    assert finished == {"type": "COMPLETE_WORKFLOW_EXECUTION", "result": '"l"'}


@workflow.defn
class SetsHandlersAtRunTime:
    @workflow.run
    async def run(self) -> str:
        received: list[Parcel] = []

        def on_parcel(parcel: Parcel) -> None:
            received.append(parcel)

        def size_of(index: int, unit: Size) -> str:
            return f"{received[index].size.value}{unit.value}"

        workflow.set_signal_handler("parcel", on_parcel)
        workflow.set_query_handler("size_of", size_of)
        await workflow.wait_condition(lambda: bool(received))
        return type(received[0]).__name__


def test_handlers_set_at_run_time_decode_by_their_own_hints():
    run = Run(SetsHandlersAtRunTime, start_signal=("parcel", [WIRE]))  # waits for the handler
    (complete,) = run.step()
    assert complete["result"] == '"Parcel"'
    assert run.instance.query("size_of", '[0, "s"]') == '"ls"'
