"""Start the crash test's workflows and check what they left, after crashes and takeovers.

Shared by the workflow crash test and the takeover test: both run `ThreeStepsAndATimer`
on engine processes that are killed, and both check the same invariants on the events
topic as a read_committed reader sees it, and on what the client answers.
"""

from __future__ import annotations

import collections
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from streamproc.client import SyncClient, WorkflowNotStartedError, WorkflowStartOutcomeUnknownError
from streamproc.client.workflow_events import WorkflowEvent, workflow_event
from streamproc.semantics.workflow_events import EventType
from streamproc.semantics.workflow_history import check_well_formed
from streamproc.state.db import PartitionDb
from streamproc.state.families import Family
from tests.support.crash_workflows import ThreeStepsAndATimer, expected_result
from tests.support.history import EventLog

COMPLETED = "WORKFLOW_EXECUTION_COMPLETED"

Runs = dict[str, list[WorkflowEvent]]


class Starter:
    """Starts workflows through the client from a few threads; a start waits out engine restarts."""

    def __init__(self, bootstrap: str, namespace: str, task_queue: str, workflow=ThreeStepsAndATimer.run) -> None:
        self.client = SyncClient(bootstrap, namespace)
        self.task_queue = task_queue
        self.workflow = workflow
        self.pool = ThreadPoolExecutor(8)
        self.futures = []
        self.workflow_ids: list[str] = []
        #: starts given up by the client once (then asked again): `workflow id: error`
        self.give_ups: list[str] = []

    def start(self, workflow_ids: list[str]) -> None:
        self.workflow_ids += workflow_ids
        self.futures += [self.pool.submit(self._start, workflow_id) for workflow_id in workflow_ids]

    def _start(self, workflow_id: str, tries: int = 3):
        """As a careful caller does: a start whose outcome is unknown, or that was not sent,
        is asked again with the same request id (the engine answers a repeated one with the
        run it started, so a run is never started twice). Each give-up is kept for the
        test's report."""
        for n in range(tries):
            try:
                return self.client.start_workflow(self.workflow, workflow_id, id=workflow_id,
                                                  task_queue=self.task_queue, request_id=f"start-{workflow_id}",
                                                  rpc_timeout=120)
            except (WorkflowStartOutcomeUnknownError, WorkflowNotStartedError) as exc:
                self.give_ups.append(f"{workflow_id}: {type(exc).__name__}: {exc}")
                if n == tries - 1:
                    raise

    def failures(self) -> list[str]:
        """The starts that raised, as `workflow id: error` (a test's diagnosis when runs are missing)."""
        return [f"{wid}: {type(f.exception()).__name__}: {f.exception()}"
                for wid, f in zip(self.workflow_ids, self.futures) if f.done() and f.exception() is not None]

    def submitted(self) -> int:
        return len(self.futures)

    def started(self) -> int:
        return sum(1 for f in self.futures if f.done() and f.exception() is None)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        self.client.close_workflow_requests()
        self.client.close()

    def abandon(self) -> None:
        """After a failure: do not wait for starts still pending."""
        self.pool.shutdown(wait=False, cancel_futures=True)


def runs_from_events(events: EventLog) -> Runs:
    """History events per run id, in event id order, as rebuilt from the events topic."""
    runs: Runs = collections.defaultdict(list)
    for record in events.events("WORKFLOW"):
        event = workflow_event(record)
        runs[event.run_id].append(event)
    for history in runs.values():
        history.sort(key=lambda e: e.event_id)
    return runs


def assert_nothing_written_twice(events: EventLog, runs: Runs) -> None:
    """No command's answer twice (a command replayed after a crash) and no history event twice.

    Commands the due-date checker made inside a transaction have no position (-1): the
    per-run check covers what they wrote.
    """
    replayed = [d for d in events.duplicates() if d[1] >= 0]
    assert replayed == [], replayed[:5]
    twice = [k for k, n in collections.Counter(
        (e.run_id, e.event_id) for h in runs.values() for e in h).items() if n > 1]
    assert twice == [], twice[:5]


def start_processes(engine, workers: list) -> None:
    """The engine, then the workers, each once it holds its partitions."""
    engine.start().wait_for_log("partitions_assigned")
    for w in workers:
        w.start()
    for w in workers:
        w.wait_for_log("workflow_tasks_assigned")


def check_histories(runs: Runs) -> dict[str, list[str]]:
    """Every run's history is gapless and well-formed; returns workflow id → run ids."""
    by_workflow = collections.defaultdict(list)
    for run_id, history in runs.items():
        by_workflow[history[0].workflow_id].append(run_id)
        assert [e.event_id for e in history] == list(range(1, len(history) + 1)), f"{run_id}: gaps or twice"
        problems = check_well_formed([(e.event_id, EventType[e.event_type], e.attributes) for e in history])
        assert problems == [], (run_id, problems)
    return by_workflow


def check_completed_once(runs: Runs, ids: list[str], local: bool = False) -> dict[str, list[str]]:
    """Each workflow of `ids` (and no other in `runs`): one run, a gapless well-formed history,
    one completion with its result, its three steps (`local`: three local activity markers)
    and its timer. Returns workflow id → run ids."""
    by_workflow = check_histories(runs)
    assert sorted(by_workflow) == sorted(ids)
    assert {len(r) for r in by_workflow.values()} == {1}, "a workflow has more than one run"
    for workflow_id, (run_id,) in by_workflow.items():
        history = runs[run_id]
        closes = [e for e in history if e.is_close]
        assert [e.event_type for e in closes] == [COMPLETED], (workflow_id, closes)
        assert orjson.loads(closes[0].attributes["result"]) == expected_result(workflow_id)
        types = collections.Counter(e.event_type for e in history)
        steps = (types["MARKER_RECORDED"],) * 2 if local else \
            (types["ACTIVITY_TASK_SCHEDULED"], types["ACTIVITY_TASK_COMPLETED"])
        assert (*steps, types["TIMER_FIRED"]) == (3, 3, 1), (workflow_id, types)
    return by_workflow


def histories_from_the_client(bootstrap: str, namespace: str, workflow_ids: list[str]) -> dict[str, list]:
    """Run id → history (GET_HISTORY) of the current run of each of `workflow_ids`."""
    with SyncClient(bootstrap, namespace) as client:
        histories = {}
        for workflow_id in workflow_ids:
            run_id = client.get_workflow_handle(workflow_id).describe().run_id
            histories[run_id] = client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history().events
        client.close_workflow_requests()
    return histories


def assert_client_sees_the_events_topic(fetched: dict[str, list], runs: Runs) -> None:
    """What GET_HISTORY answered is exactly what the events topic holds, run by run."""
    for run_id, history in fetched.items():
        assert history == [e.as_history_event() for e in runs[run_id]], run_id


def check_the_events_topic(events: EventLog, fetched: dict[str, list]) -> Runs:
    """Read the events topic to its end (every process stopped: no late duplicate hides),
    check that nothing was written twice and that what the client answered (`fetched`, from
    `histories_from_the_client`) is what the topic holds. Returns the runs it holds."""
    events.read_to_end(timeout=60)
    runs = runs_from_events(events)
    assert_nothing_written_twice(events, runs)
    assert_client_sees_the_events_topic(fetched, runs)
    return runs


def open_activities(state_dir: Path) -> list[dict]:
    """The activities a (stopped) engine's partitions still hold open."""
    found = []
    for path in sorted(state_dir.glob("*/partition-*")):
        db = PartitionDb(path, int(path.name.split("-")[1]))
        try:
            found += [orjson.loads(value) for _, value in db.scan(Family.ACTIVITIES)]
        finally:
            db.close()
    return found
