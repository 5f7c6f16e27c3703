"""A workflow worker runs the local activities of a batch's tasks all at once: each task
whose code waits on one is set aside, and answered as soon as its code is done."""

from __future__ import annotations

import threading
from datetime import timedelta

import orjson

from streamproc import activity, workflow
from streamproc.protocol.records import WorkflowIntent
from streamproc.worker.sticky_cache import StickyCache
from streamproc.worker.workflow_activation import PendingAnswer, WorkflowTaskHandler
from streamproc.worker.workflow_task_pages import TaskPageAssembler
from streamproc.workflow.definition import WorkflowDefinition
from streamproc.workflow.instance import WorkflowInstance
from streamproc.workflow.local_activity_runner import LocalActivityRunner
from tests.support.workflow_tasks import first_task_history, task_records

RUNS = 4
MEET = threading.Barrier(RUNS, timeout=20)


@activity.defn
def meet(n: int) -> int:
    MEET.wait()  # breaks (and the attempt fails) unless all the batch's calls run at once
    return n


@workflow.defn(name="Order")
class Meeting:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_local_activity(
            meet, n, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=workflow.RetryPolicy(maximum_attempts=1))


def test_the_local_activities_of_a_batch_run_at_once_and_each_task_is_answered():
    runner = LocalActivityRunner()
    handler = WorkflowTaskHandler(
        {"Order": WorkflowDefinition.of(Meeting)}, "worker-1",
        lambda definition, history, run_id: WorkflowInstance(definition, history, run_id=run_id,
                                                             local_activities=runner),
        StickyCache(10))
    pages = TaskPageAssembler()
    tasks = [pages.add(task_records(first_task_history(), run_id=f"run-{n}")[0], 0, n) for n in range(RUNS)]
    try:
        waiting, sent = [], []
        for task in tasks:
            answer = handler.answer(task, wait=False)
            if isinstance(answer, PendingAnswer):
                waiting.append(answer)
            else:  # the last call meets the others at once: its task may be done already
                sent.append((task.run_id, answer))
        assert len(waiting) >= RUNS - 1, "a call ended before the last one of the batch started"
        handler.answer_when_local_activities_end(waiting, lambda task, answer: sent.append((task.run_id, answer)))
    finally:
        runner.close()
    assert sorted(run_id for run_id, _ in sent) == [f"run-{n}" for n in range(RUNS)]
    for _, answer in sent:
        assert answer.intent == WorkflowIntent.TASK_COMPLETE
        commands = orjson.loads(answer.value["commands"])
        assert [c["type"] for c in commands] == ["RECORD_MARKER", "COMPLETE_WORKFLOW_EXECUTION"]
        assert "result" in commands[0]["details"], commands[0]["details"]
