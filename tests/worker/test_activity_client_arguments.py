"""ActivityClient checks its arguments with the engine's own rules and words, before
sending anything (these tests have no broker: a check that let through would hang)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.activity import InvalidArgument, RetryPolicy
from streamproc.client import ActivityClient, Client

S = timedelta(seconds=1)


@pytest.fixture
def activities():
    # log_level 0: the producer never connects, and need not say so
    with Client("127.0.0.1:1", "no-broker", log_level=0) as client, ActivityClient(client) as activities:
        yield activities


@pytest.mark.parametrize(("options", "message"), [
    ({}, "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
         "ActivityId=a-1 ActivityType=charge"),
    ({"start_to_close_timeout": "NONE", "schedule_to_close_timeout": None},
     "a valid StartToCloseTimeout or ScheduleToCloseTimeout must be set on the activity. "
     "ActivityId=a-1 ActivityType=charge"),
    ({"start_to_close_timeout": -S}, "invalid StartToCloseTimeout: negative duration"),
    ({"start_to_close_timeout": S, "heartbeat_timeout": -S}, "invalid HeartbeatTimeout: negative duration"),
    ({"start_to_close_timeout": S, "retry_policy": RetryPolicy(backoff_coefficient=0.5)},
     "BackoffCoefficient cannot be less than 1 on retry policy."),
    ({"start_to_close_timeout": S, "retry_policy": RetryPolicy(initial_interval=10 * S, maximum_interval=S)},
     "MaximumInterval cannot be less than InitialInterval on retry policy."),
    ({"start_to_close_timeout": S, "retry_policy": RetryPolicy(non_retryable_error_types=["TemporalTimeout:Bogus"])},
     "Invalid timeout type value: Bogus."),
    ({"start_to_close_timeout": S, "task_queue": "no spaces"},
     "task queue must be 1-200 characters of letters, digits, '.', '_' or '-', got 'no spaces'"),
])
def test_invalid_arguments_raise_the_engines_message(activities, options, message):
    options = {"task_queue": "payments", **options}
    with pytest.raises(InvalidArgument) as caught:
        activities.schedule_activity("charge", 5, activity_id="a-1", **options)
    assert str(caught.value) == message


def test_a_timeout_must_be_a_timedelta(activities):
    with pytest.raises(TypeError, match="start_to_close_timeout must be a timedelta, None or 'NONE', got 10"):
        activities.schedule_activity("charge", task_queue="payments", start_to_close_timeout=10)


def test_an_undecorated_function_is_not_an_activity(activities):
    def charge():
        pass

    with pytest.raises(TypeError, match="decorate it with @activity.defn"):
        activities.schedule_activity(charge, task_queue="payments", start_to_close_timeout=S)
