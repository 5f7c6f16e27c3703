"""Checkpointed local activities journaled: each marker reaches the engine (JOURNAL_MARKERS)
before the next call runs, the task stays out, and its one answer writes every marker; a
task that times out after a journal hands its markers to the next attempt, whose code
takes them without calling the functions again."""

from __future__ import annotations

import concurrent.futures
import threading
from datetime import timedelta

import orjson
import pytest

from streamproc import workflow
from streamproc.activity import defn
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import WorkflowInstance
from streamproc.workflow.local_activity_runner import LocalActivityRunner
from streamproc.workflow.replayer import Replayer
from tests.engine.workflow_driver import S, WorkflowDriver, attrs

#: (step, what the engine kept journaled for the run when the step ran)
CALLS: list[tuple[str, list[str]]] = []
DRIVER: list[WorkflowDriver] = []


def _journaled_now() -> list[str]:
    d = DRIVER[0]
    key = d.current_key("w1")
    return [m["details"]["seq"] for m in d.run(key).get("journaled_markers", [])]


@defn
def step(name: str) -> str:
    CALLS.append((name, _journaled_now()))
    return name.upper()


@workflow.defn(name="Order")
class ThreeSteps:
    @workflow.run
    async def run(self, _order: str) -> list:
        out = []
        for name in ("a", "b", "c"):
            out.append(await workflow.execute_local_activity(step, name, start_to_close_timeout=timedelta(seconds=5)))
        return out


@workflow.defn(name="Order")
class TimerThenSteps:
    @workflow.run
    async def run(self, _order: str) -> list:
        workflow.start_activity("remote", "x", start_to_close_timeout=timedelta(seconds=5))
        return [await workflow.execute_local_activity(step, name, start_to_close_timeout=timedelta(seconds=5))
                for name in ("a", "b")]


@pytest.fixture
def d(tmp_path):
    CALLS.clear()
    driver = WorkflowDriver(tmp_path / "wf")
    DRIVER[:] = [driver]
    yield driver
    driver.close()


class Journal:
    """Sends each journal to the engine at once and says it landed; after `landings` of
    them, the rest never land (as with a broker gone)."""

    def __init__(self, d: WorkflowDriver, key: int, landings: int = 1_000) -> None:
        self.d, self.key, self.landings, self.sent, self.pending, self.before = d, key, landings, [], [], []

    def __call__(self, markers, journaled_before):
        task = self.d.task(self.key)
        self.sent.append([m["details"]["seq"] for m in markers])
        self.before.append(journaled_before)
        landed = concurrent.futures.Future()
        self.pending.append(landed)
        if len(self.sent) > self.landings:
            return landed
        self.d.send("JOURNAL_MARKERS", self.key, scheduled_event_id=task["scheduled_event_id"],
                    attempt=task["attempt"], identity="wf-worker", commands=orjson.dumps(markers).decode(),
                    attributes=orjson.dumps({"journaled_before": journaled_before}).decode())
        landed.set_result(True)
        return landed


def _instance(d, cls, key, journal, history=None):
    history = d.history(key) if history is None else history
    instance = WorkflowInstance(WorkflowDefinition.of(cls), history, local_activities=LocalActivityRunner(),
                                checkpoint_local_activities=True)
    instance.marker_journal = journal
    return instance


def _answer_three_steps(d, key, outcome, attempt=0):
    """Answer ThreeSteps' task with `outcome`: its history, checked (three markers, the
    result, a replay that agrees)."""
    d.send("TASK_COMPLETE", key, scheduled_event_id=d.task(key)["scheduled_event_id"], identity="wf-worker",
           attempt=attempt, commands=orjson.dumps(outcome.commands).decode())
    events = d.check(key)
    assert [m["details"]["seq"] for m in attrs(events, "MARKER_RECORDED")] == ["1", "2", "3"]
    assert orjson.loads(attrs(events, "WORKFLOW_EXECUTION_COMPLETED")[0]["result"]) == ["A", "B", "C"]
    Replayer(workflows=[ThreeSteps]).replay(events)
    return events


def test_each_marker_is_with_the_engine_before_the_next_step_runs_and_one_answer_writes_them(d):
    key, _ = d.start()
    journal = Journal(d, key)
    outcome = _instance(d, ThreeSteps, key, journal).activate()
    assert CALLS == [("a", []), ("b", ["1"]), ("c", ["1", "2"])]
    assert journal.sent == [["1"], ["2"]] and journal.before == [0, 1]
    assert not outcome.force_new_task  # one task for the three steps
    events = _answer_three_steps(d, key, outcome)
    assert [e["event_type"] for e in events].count("WORKFLOW_TASK_COMPLETED") == 1


def test_a_task_that_dies_after_a_journal_hands_its_markers_to_the_next_attempt(d):
    key, _ = d.start()
    # The worker dies while step b's marker is on its way (it never lands): a and b ran.
    journal = Journal(d, key, landings=1)
    first = _instance(d, ThreeSteps, key, journal)
    while len(journal.sent) < 2:
        assert first.activate(wait=False) is None
    assert [name for name, _ in CALLS] == ["a", "b"]
    del first
    d.run_until(d.clock.now_ms() + 11 * S)  # the task times out; its next attempt carries "1"
    task = d.workflow_tasks()[-1].value
    carried = orjson.loads(task["attributes"])["journaled_markers"]
    assert task["attempt"] == 2 and [m["attributes"]["details"]["seq"] for m in carried] == ["1"]
    CALLS.clear()
    journal = Journal(d, key)
    second = _instance(d, ThreeSteps, key, journal, history=d.shown(key))  # with its transient task
    second.offer_journaled(carried)
    outcome = second.activate()
    assert not outcome.failed, outcome.failure
    assert [name for name, _ in CALLS] == ["b", "c"]  # a is not called again
    assert journal.sent == [["2"]] and journal.before == [1]  # it follows what the run kept
    assert [c["details"]["seq"] for c in outcome.commands if c["type"] == "RECORD_MARKER"] == ["1", "2", "3"]
    _answer_three_steps(d, key, outcome, attempt=2)


def test_a_journal_that_does_not_land_gives_way_to_a_task_per_step(d):
    key, _ = d.start()
    journal = Journal(d, key, landings=0)
    instance = _instance(d, ThreeSteps, key, journal)
    while not journal.sent:
        assert instance.activate(wait=False) is None
    assert [name for name, _ in CALLS] == ["a"] and journal.sent == [["1"]]
    journal.pending[0].set_result(False)  # the broker did not confirm it
    outcome = instance.activate()
    assert outcome.force_new_task and [c["details"]["seq"] for c in outcome.commands] == ["1"]


def test_a_task_with_a_command_before_its_markers_is_answered_per_step_not_journaled(d):
    key, _ = d.start()
    journal = Journal(d, key)
    outcome = _instance(d, TimerThenSteps, key, journal).activate()
    assert journal.sent == []  # the activity's command must stay before the markers
    assert outcome.force_new_task and [c["type"] for c in outcome.commands] == ["SCHEDULE_ACTIVITY_TASK",
                                                                                "RECORD_MARKER"]


@defn
def slow_background() -> str:
    RELEASE.wait(5)
    return "bg"


RELEASE = threading.Event()


@workflow.defn(name="Order")
class WithBackground:
    @workflow.run
    async def run(self, _order: str) -> list:
        t = timedelta(seconds=30)
        bg = workflow.start_local_activity(slow_background, start_to_close_timeout=t)
        first = await workflow.execute_local_activity(step, "a", start_to_close_timeout=t)
        second = await workflow.execute_local_activity(step, "b", start_to_close_timeout=t)
        return [first, second, await bg]


def test_a_call_that_ends_while_a_journal_is_in_flight_waits_for_it_without_spinning(d):
    RELEASE.clear()
    key, _ = d.start()
    journal = Journal(d, key, landings=0)
    instance = _instance(d, WithBackground, key, journal)
    while not journal.sent:
        assert instance.activate(wait=False) is None
    RELEASE.set()  # the background call ends while the journal is in flight
    background = [call.job for call in instance._runtime.local_activities.pending.values()
                  if call.request.activity_type == "slow_background"]
    concurrent.futures.wait(background, timeout=5)
    assert instance.local_activity_jobs() == [journal.pending[0]]  # the one thing it waits on
    assert not instance.local_activities_ready()
    threading.Timer(0.3, journal.pending[0].set_result, (True,)).start()  # the broker answers
    resumes = 0
    while True:
        concurrent.futures.wait(instance.local_activity_jobs(), timeout=5,
                                return_when=concurrent.futures.FIRST_COMPLETED)
        if not instance.local_activities_ready():
            continue
        resumes += 1
        outcome = instance.activate(wait=False)
        if outcome is not None:
            break
    assert resumes < 20, f"{resumes} resumes: the wait spins"
    assert orjson.loads(outcome.commands[-1]["result"]) == ["A", "B", "bg"]


@workflow.defn(name="Order")
class StampedSteps:
    """Reads the task's time once and passes it to each step."""

    @workflow.run
    async def run(self, _order: str) -> list:
        stamp = str(workflow.time_ns())
        return [await workflow.execute_local_activity(step, stamp, start_to_close_timeout=timedelta(seconds=5))
                for _ in range(2)]


def test_a_task_whose_code_read_its_time_is_answered_per_step_not_journaled(d):
    # A retried attempt runs under another time: after journaled steps it could call other things.
    key, _ = d.start()
    journal = Journal(d, key)
    outcome = _instance(d, StampedSteps, key, journal).activate()
    assert journal.sent == [] and outcome.force_new_task


def test_a_retried_attempt_counts_the_bytes_carried_to_it(d):
    # 100 KiB carried: with the next step's marker past 128 KiB the task is answered instead.
    key, _ = d.start()
    big = {"seq": "1", "activity_id": "1", "activity_type": "step", "attempt": 1, "result": '"' + "z" * 100_000 + '"'}
    carried = [{"event_type": "MARKER_RECORDED", "attributes": {"marker_name": "LocalActivity", "details": big}}]
    journal = Journal(d, key)
    instance = _instance(d, ThreeSteps, key, journal)
    instance.offer_journaled(carried)
    outcome = instance.activate()
    assert journal.sent == [["2"]]  # 100 KiB and the small marker 2: still under the bound
    CALLS.clear()
    carried[0]["attributes"]["details"] = {**big, "result": '"' + "z" * 131_000 + '"'}
    journal = Journal(d, key)
    instance = _instance(d, ThreeSteps, key, journal)
    instance.offer_journaled(carried)
    outcome = instance.activate()
    assert journal.sent == [] and outcome.force_new_task and [name for name, _ in CALLS] == ["b"]
