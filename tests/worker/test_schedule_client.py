"""The client checks a schedule's spec with the engine's own compiler before sending it."""

from __future__ import annotations

import pytest

from streamproc.client import Client, Schedule, ScheduleActionStartWorkflow
from streamproc.exceptions import InvalidArgument

ACTION = ScheduleActionStartWorkflow("Report", id="report", task_queue="reports")


@pytest.mark.parametrize("spec, message", [
    ({"cron_string": ["@every 5q"]}, 'Invalid schedule spec: time: unknown unit "q" in duration "5q"'),
    ({"cron_string": ["0 12 * *"]}, "Invalid schedule spec: CronString does not have 5-7 fields"),
    ({"timezone_name": "Mars/Olympus", "interval": [{"interval_ms": 1000}]}, "Mars/Olympus"),
])
def test_a_bad_spec_is_refused_before_anything_is_sent(spec, message):
    # No broker at this address: the refusal must come before any request.
    with Client("127.0.0.1:1", "nowhere") as client:
        with pytest.raises(InvalidArgument, match=message.replace("(", r"\(").replace("[", r"\[")):
            client.create_schedule("s", Schedule(action=ACTION, spec=spec))
