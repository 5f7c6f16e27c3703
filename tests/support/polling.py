"""Waiting in a test for what another thread or process does: poll, with a deadline; or
read a run's events as they come."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], timeout: float = 60.0, what: str | Callable[[], str] = "the condition",
               *, every: float = 0.05) -> Any:
    """Poll `condition` until it returns something true, and return that. After `timeout`
    seconds, TimeoutError: `what` (a text, or a function making it) says what did not happen."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what() if callable(what) else what} within {timeout} s")
        time.sleep(every)
    return value


def wait_for_event(client: Any, workflow_id: str, event_type: str, timeout: float = 60) -> Any:
    """The first event of `event_type` in the current run of `workflow_id`, read from the
    events topic as it comes (the scanner raises once `timeout` seconds have passed)."""
    with client.workflow_requests.scanner(workflow_id, None) as scanner:
        for event in scanner.events(workflow_id, timeout):
            if event.event_type == event_type:
                return event
    raise AssertionError("unreachable")
