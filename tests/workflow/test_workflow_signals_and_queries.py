"""Signal and query handlers in the SDK: order, timing, buffering, read-only queries."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc import workflow
from streamproc.exceptions import WorkflowQueryFailedError
from streamproc.workflow.instance import WorkflowInstance
from tests.support.orders import Order
from tests.workflow.history import Run


def _complete(commands):
    return [c for c in commands if c["type"] == "COMPLETE_WORKFLOW_EXECUTION"]


def _completions_of_the_next_task(run):
    """Schedule a workflow task and run it: the COMPLETE_WORKFLOW_EXECUTION commands it issued."""
    run.history.schedule_task()
    return _complete(run.step())


def test_signals_reach_their_handlers_in_the_order_recorded_and_complete_the_run():
    run = Run(Order, "ann")
    run.step()
    for item in ("a", "b", "c"):
        run.history.signaled("add_item", [item])
    run.history.signaled("approve")
    (close,) = _completions_of_the_next_task(run)
    assert close["result"] == '{"customer":"ann","items":["a","b","c"]}'
    assert run.replay().commands == []  # the recorded history replays without a mismatch


def test_signals_recorded_before_the_first_task_run_before_the_run_method():
    run = Run(Order, "ann", start_signal=("add_item", ["early"]))
    run.step()
    assert run.instance._runtime._main is not None
    assert run.instance.query("count", "[]") == "1"
    instance = WorkflowInstance(run.definition, run.history.events)
    instance.activate()
    # seen_at_start proves the handler ran before the run method's first line
    assert instance._runtime.handlers._signals["add_item"].__self__.seen_at_start == ["early"]


def test_a_signal_with_no_handler_waits_for_one_set_later():
    @workflow.defn
    class Late:
        def __init__(self) -> None:
            self.got: list[str] = []

        @workflow.run
        async def run(self) -> list:
            await workflow.sleep(timedelta(seconds=1))
            workflow.set_signal_handler("late", lambda x: self.got.append(x))
            await workflow.wait_condition(lambda: len(self.got) == 2)
            return self.got

    run = Run(Late)
    run.step()
    run.history.signaled("late", ["one"])
    run.history.signaled("late", ["two"])
    run.history.timer_fired("1")
    (close,) = _completions_of_the_next_task(run)
    assert close["result"] == '["one","two"]'


def test_a_dynamic_signal_handler_gets_the_name_and_the_arguments():
    @workflow.defn
    class Dyn:
        def __init__(self) -> None:
            self.got: list = []

        @workflow.run
        async def run(self) -> list:
            await workflow.wait_condition(lambda: len(self.got) == 2)
            return self.got

        @workflow.signal(dynamic=True)
        def anything(self, name: str, args: list) -> None:
            self.got.append([name, *args])

    run = Run(Dyn)
    run.step()
    run.history.signaled("x", [1])
    run.history.signaled("y", [2, 3])
    (close,) = _completions_of_the_next_task(run)
    assert close["result"] == '[["x",1],["y",2,3]]'


def test_a_signal_handler_that_raises_an_application_error_fails_the_run():
    @workflow.defn
    class Strict:
        @workflow.run
        async def run(self) -> None:
            await workflow.wait_condition(lambda: False)

        @workflow.signal
        def refuse(self) -> None:
            raise workflow.ApplicationError("not now", type="Refused")

    run = Run(Strict)
    run.step()
    run.history.signaled("refuse")
    run.history.schedule_task()
    (fail,) = [c for c in run.step() if c["type"] == "FAIL_WORKFLOW_EXECUTION"]
    assert fail["failure"]["message"] == "not now"


def test_queries_read_state_and_fail_clearly():
    run = Run(Order, "ann")
    run.step()
    run.history.signaled("add_item", ["a"])
    run.history.schedule_task()
    run.step()
    assert run.instance.query("count", "[]") == "1"
    assert run.instance.query("first", "[]") == '"a"'
    with pytest.raises(WorkflowQueryFailedError, match=r"Query handler for 'nope' expected but not found, "
                                                        r"known queries: \[__stack_trace broken count first sneaky\]"):
        run.instance.query("nope", "[]")
    with pytest.raises(WorkflowQueryFailedError, match="While in read-only function, action attempted: start activity"):
        run.instance.query("sneaky", "[]")
    # the failed query changed nothing: the next task still replays and completes
    run.history.signaled("approve")
    assert _completions_of_the_next_task(run)
    assert run.replay().commands == []


def test_a_query_on_a_closed_run_replays_it_and_stack_trace_shows_waiting_coroutines():
    run = Run(Order, "ann")
    run.step()
    stack = run.instance.query("__stack_trace", "[]")
    assert "wait_condition" in stack
    run.history.signaled("add_item", ["a"])
    run.history.signaled("approve")
    run.history.schedule_task()
    run.step()
    fresh = WorkflowInstance(run.definition, run.history.events)
    assert fresh.query("count", "[]") == "1"


def test_query_handlers_may_not_be_async_and_names_are_unique():
    with pytest.raises(TypeError, match="must not be async"):
        class Bad:
            @workflow.query
            async def q(self) -> int:
                return 1
    with pytest.raises(TypeError, match="two signal handlers named 's'"):
        @workflow.defn
        class Twice:
            @workflow.run
            async def run(self) -> None: ...

            @workflow.signal(name="s")
            def a(self) -> None: ...

            @workflow.signal(name="s")
            def b(self) -> None: ...


def test_all_handlers_finished_waits_for_async_handlers():
    @workflow.defn
    class Patient:
        def __init__(self) -> None:
            self.done = False

        @workflow.run
        async def run(self) -> bool:
            await workflow.wait_condition(lambda: self.done)
            await workflow.wait_condition(workflow.all_handlers_finished)
            return True

        @workflow.signal
        async def slow(self) -> None:
            self.done = True
            await workflow.sleep(timedelta(seconds=5))

    run = Run(Patient)
    run.step()
    run.history.signaled("slow")
    run.history.schedule_task()
    commands = run.step()
    assert [c["type"] for c in commands] == ["START_TIMER"]  # not complete: the handler still sleeps
    run.history.timer_fired(commands[0]["timer_id"])
    assert _completions_of_the_next_task(run)


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items = ["a", "b"]
        self.done = False

    @workflow.run
    async def run(self) -> list:
        await workflow.wait_condition(lambda: self.done)
        return self.items

    @workflow.update
    async def remove_item(self, item: str) -> int:
        await workflow.sleep(timedelta(seconds=1))
        self.items.remove(item)
        return len(self.items)

    @remove_item.validator
    def _check(self, item: str) -> None:
        if item not in self.items:
            raise ValueError(f"no item {item}")

    @workflow.update
    def finish(self) -> str:
        self.done = True
        return "ok"


def test_an_update_the_validator_rejects_issues_only_a_rejection():
    run = Run(Cart)
    run.step()
    request = run.history.send_update("u-1", "remove_item", ["zzz"])
    run.history.schedule_task()
    (reject,) = run.step([request])
    assert reject["type"] == "REJECT_UPDATE" and reject["update_id"] == "u-1"
    assert reject["failure"]["message"] == "no item zzz"
    assert run.instance.query("__stack_trace", "[]")  # the run is untouched and goes on
    assert run.replay().commands == []


def test_an_accepted_update_runs_its_handler_across_tasks_and_replays():
    run = Run(Cart)
    run.step()
    request = run.history.send_update("u-1", "remove_item", ["a"])
    run.history.schedule_task()
    commands = run.step([request])
    assert [c["type"] for c in commands] == ["ACCEPT_UPDATE", "START_TIMER"]
    run.history.timer_fired(commands[1]["timer_id"])
    run.history.schedule_task()
    (complete,) = run.step()
    assert complete == {"type": "COMPLETE_UPDATE", "update_id": "u-1", "result": "1"}
    finish = run.history.send_update("u-2", "finish")
    run.history.schedule_task()
    commands = run.step([finish])
    assert [c["type"] for c in commands] == ["ACCEPT_UPDATE", "COMPLETE_UPDATE", "COMPLETE_WORKFLOW_EXECUTION"]
    assert commands[-1]["result"] == '["b"]'
    # a fresh worker replays the accepted updates without their validators, and matches
    assert run.replay().commands == []


def test_an_unknown_update_is_rejected_with_temporals_message():
    run = Run(Cart)
    run.step()
    request = run.history.send_update("u-9", "nope")
    run.history.schedule_task()
    (reject,) = run.step([request])
    assert reject["failure"]["message"] == ("Update handler for 'nope' expected but not found, "
                                            "known updates: [finish remove_item]")


@workflow.defn
class Payment:
    @workflow.run
    async def run(self, items: list) -> str:
        return f"paid {len(items)}"


@workflow.defn
class Checkout:
    @workflow.run
    async def run(self) -> list:
        handle = await workflow.start_child_workflow(Payment.run, ["a", "b"], id="pay-1",
                                                     parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL)
        await handle.signal("nudge")
        await workflow.get_external_workflow_handle("other").cancel()
        try:
            await workflow.execute_child_workflow("Payment", [], id="pay-2")
        except workflow.ChildWorkflowError as err:
            return [await handle, f"{type(err.cause).__name__}: {err.cause}"]
        return []


def test_children_and_external_requests_follow_their_events_and_replay():
    run = Run(Checkout)
    (start,) = run.step()
    assert start["type"] == "START_CHILD_WORKFLOW_EXECUTION" and start["parent_close_policy"] == "REQUEST_CANCEL"
    assert start["workflow_type"] == "Payment" and start["workflow_id"] == "pay-1"
    initiated = run.history.events[-1]["event_id"]
    h = run.history
    h.add("CHILD_WORKFLOW_EXECUTION_STARTED", initiated_event_id=initiated,
          workflow_execution={"workflow_id": "pay-1", "run_id": "c-1"}, workflow_type="Payment", namespace="")
    h.schedule_task()
    (signal,) = run.step()
    assert signal == {"type": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION", "workflow_id": "pay-1", "run_id": "",
                      "signal_name": "nudge", "input": "[]", "child_workflow_only": True}
    h.add("EXTERNAL_WORKFLOW_EXECUTION_SIGNALED", initiated_event_id=h.events[-1]["event_id"], namespace="",
          workflow_execution={"workflow_id": "pay-1", "run_id": ""}, control="")
    h.schedule_task()
    (cancel,) = run.step()
    assert cancel["type"] == "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION" and cancel["workflow_id"] == "other"
    h.add("REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED", initiated_event_id=h.events[-1]["event_id"],
          cause="EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND", namespace="", workflow_execution={"workflow_id": "other"})
    h.schedule_task()
    (failed,) = run.step()  # the code does not catch it: the run fails with it
    assert failed["type"] == "FAIL_WORKFLOW_EXECUTION"
    assert failed["failure"]["message"] == "Unable to cancel external workflow because it was not found"
    assert run.replay().commands == []
