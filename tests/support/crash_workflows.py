"""The workflow and activities of the workflow crash test, loaded by worker processes by name.

`ThreeStepsAndATimer` runs three activities and a short real-time timer
(`ThreeLocalStepsAndATimer`: the same as local activities). Each activity
execution appends one line to a file of its own process in the directory named by
`EFFECTS_DIR_VARIABLE`, so the test can count side effects: at-least-once per attempt
is allowed, but no step may run again once its ActivityTaskCompleted is on the log.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import orjson

from streamproc import activity, workflow
from streamproc.semantics import RetryPolicy

EFFECTS_DIR_VARIABLE = "STREAMPROC_TEST_EFFECTS_DIR"
TIMER = timedelta(seconds=1)
#: How long a step works: long enough that a killed worker takes running attempts with it.
STEP_WORK_S = 0.2
#: Short, so that an attempt lost with a killed worker is retried within seconds.
STEP_OPTIONS = {
    "start_to_close_timeout": timedelta(seconds=3),
    "retry_policy": RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.5,
                                maximum_interval=timedelta(seconds=1)),
}


def _record_effect(**effect) -> None:
    """One line per execution, written with a single append so a kill never tears it."""
    directory = os.environ.get(EFFECTS_DIR_VARIABLE)
    if not directory:
        return
    fd = os.open(Path(directory) / f"effects-{os.getpid()}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, orjson.dumps(effect) + b"\n")
    finally:
        os.close(fd)


@activity.defn
def crash_step(workflow_id: str, step: int, so_far: str) -> str:
    time.sleep(STEP_WORK_S)
    _record_effect(workflow_id=workflow_id, step=step, attempt=activity.info().attempt)
    return f"{so_far}>{step}"


async def _three_steps_and_a_timer(execute, workflow_id: str) -> str:
    result = workflow_id
    for step in (1, 2):
        result = await execute(crash_step, args=[workflow_id, step, result], **STEP_OPTIONS)
    await workflow.sleep(TIMER)
    return await execute(crash_step, args=[workflow_id, 3, result], **STEP_OPTIONS)


@workflow.defn
class ThreeStepsAndATimer:
    @workflow.run
    async def run(self, workflow_id: str) -> str:
        return await _three_steps_and_a_timer(workflow.execute_activity, workflow_id)


@workflow.defn
class ThreeLocalStepsAndATimer:
    """The same steps as local activities, run by the workflow worker inside its tasks."""

    @workflow.run
    async def run(self, workflow_id: str) -> str:
        return await _three_steps_and_a_timer(workflow.execute_local_activity, workflow_id)


def expected_result(workflow_id: str) -> str:
    return f"{workflow_id}>1>2>3"


def read_effects(directory: Path) -> list[dict]:
    """Every execution the worker processes recorded (a kill leaves at most a torn last line)."""
    effects = []
    for path in sorted(directory.glob("effects-*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                effects.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return effects
