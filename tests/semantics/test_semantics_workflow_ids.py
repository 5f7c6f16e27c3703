"""Workflow id reuse and conflict policies: enums, defaulting, validation, and every vector
of SEMANTICS.md 4 (ID1-ID8), plus the id length limit of 6.3."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.semantics import (
    HISTORY_SERVICE_IDENTITY,
    MAX_ID_LENGTH,
    TERMINATE_EXISTING_REASON,
    AlreadyStarted,
    CurrentRun,
    InvalidArgument,
    WorkflowExecutionStatus,
    WorkflowIdAction,
    WorkflowIdConflictPolicy,
    WorkflowIdDecision,
    WorkflowIdPolicies,
    WorkflowIdReusePolicy,
    normalize_workflow_id_policies,
    resolve_duplicate_workflow_id,
    validate_workflow_id,
)

Reuse = WorkflowIdReusePolicy
Conflict = WorkflowIdConflictPolicy
Status = WorkflowExecutionStatus

RUNNING_R1 = CurrentRun("r1", Status.RUNNING, start_request_id="req-1")


def resolve(
    current: CurrentRun | None,
    reuse: Reuse = Reuse.UNSPECIFIED,
    conflict: Conflict = Conflict.UNSPECIFIED,
    *,
    signal_with_start: bool = False,
    request_id: str = "req-2",
) -> WorkflowIdDecision:
    return resolve_duplicate_workflow_id(
        normalize_workflow_id_policies(reuse, conflict, signal_with_start=signal_with_start),
        workflow_id="w",
        request_id=request_id,
        new_run_id="r2",
        current=current,
    )


# --- enums --------------------------------------------------------------------------


def test_enum_numbers_and_names() -> None:
    assert [(p.name, p.value) for p in Reuse] == [
        ("UNSPECIFIED", 0),
        ("ALLOW_DUPLICATE", 1),
        ("ALLOW_DUPLICATE_FAILED_ONLY", 2),
        ("REJECT_DUPLICATE", 3),
        ("TERMINATE_IF_RUNNING", 4),
    ]
    assert [(p.name, p.value) for p in Conflict] == [
        ("UNSPECIFIED", 0),
        ("FAIL", 1),
        ("USE_EXISTING", 2),
        ("TERMINATE_EXISTING", 3),
    ]
    assert [(s.name, s.value) for s in Status if s] == [
        ("RUNNING", 1),
        ("COMPLETED", 2),
        ("FAILED", 3),
        ("CANCELED", 4),
        ("TERMINATED", 5),
        ("CONTINUED_AS_NEW", 6),
        ("TIMED_OUT", 7),
    ]
    assert Reuse.REJECT_DUPLICATE.proto_name == "WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE"
    assert Conflict.USE_EXISTING.proto_name == "WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING"
    assert Status.TIMED_OUT.proto_name == "WORKFLOW_EXECUTION_STATUS_TIMED_OUT"


# --- defaulting and validation ------------------------------------------------------

DEFAULTING = [
    ("start-unset", Reuse.UNSPECIFIED, Conflict.UNSPECIFIED, False, Reuse.ALLOW_DUPLICATE, Conflict.FAIL),
    ("signal-with-start-unset", Reuse.UNSPECIFIED, Conflict.UNSPECIFIED, True, Reuse.ALLOW_DUPLICATE, Conflict.USE_EXISTING),
    ("terminate-if-running-migrated", Reuse.TERMINATE_IF_RUNNING, Conflict.UNSPECIFIED, False, Reuse.ALLOW_DUPLICATE, Conflict.TERMINATE_EXISTING),
    ("terminate-if-running-migrated-swws", Reuse.TERMINATE_IF_RUNNING, Conflict.UNSPECIFIED, True, Reuse.ALLOW_DUPLICATE, Conflict.TERMINATE_EXISTING),
    ("explicit-kept", Reuse.REJECT_DUPLICATE, Conflict.USE_EXISTING, False, Reuse.REJECT_DUPLICATE, Conflict.USE_EXISTING),
    ("reuse-only", Reuse.ALLOW_DUPLICATE_FAILED_ONLY, Conflict.UNSPECIFIED, False, Reuse.ALLOW_DUPLICATE_FAILED_ONLY, Conflict.FAIL),
]  # fmt: skip


@pytest.mark.parametrize(
    ("reuse", "conflict", "signal_with_start", "want_reuse", "want_conflict"),
    [d[1:] for d in DEFAULTING],
    ids=[d[0] for d in DEFAULTING],
)
def test_policy_defaulting(reuse, conflict, signal_with_start, want_reuse, want_conflict) -> None:
    assert normalize_workflow_id_policies(
        reuse, conflict, signal_with_start=signal_with_start
    ) == WorkflowIdPolicies(want_reuse, want_conflict)


INVALID = [
    (
        "terminate-if-running-with-conflict-policy",
        Reuse.TERMINATE_IF_RUNNING,
        Conflict.FAIL,
        False,
        "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING"
        " cannot be used together with a WorkflowIDConflictPolicy",
    ),
    (
        "reject-duplicate-with-terminate-existing",
        Reuse.REJECT_DUPLICATE,
        Conflict.TERMINATE_EXISTING,
        False,
        "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE"
        " cannot be used together with WorkflowIdConflictPolicy"
        " WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING",
    ),
    (
        "signal-with-start-fail",
        Reuse.UNSPECIFIED,
        Conflict.FAIL,
        True,
        "Invalid WorkflowIDConflictPolicy: WORKFLOW_ID_CONFLICT_POLICY_FAIL"
        " is not supported for this operation.",
    ),
]


@pytest.mark.parametrize(
    ("reuse", "conflict", "signal_with_start", "message"),
    [i[1:] for i in INVALID],
    ids=[i[0] for i in INVALID],
)
def test_policy_validation(reuse, conflict, signal_with_start, message) -> None:
    with pytest.raises(InvalidArgument) as info:
        normalize_workflow_id_policies(reuse, conflict, signal_with_start=signal_with_start)
    assert str(info.value) == message


def test_decision_needs_normalised_policies() -> None:
    with pytest.raises(ValueError):
        resolve_duplicate_workflow_id(
            WorkflowIdPolicies(Reuse.UNSPECIFIED, Conflict.FAIL),
            workflow_id="w",
            request_id="x",
            new_run_id="r2",
            current=None,
        )


# --- vectors ------------------------------------------------------------------------


def test_ID1_running_with_default_conflict_policy_fails() -> None:
    decision = resolve(RUNNING_R1)
    assert decision.action is WorkflowIdAction.ALREADY_STARTED
    error = decision.error()
    assert isinstance(error, AlreadyStarted)
    assert str(error) == error.message == (
        "Workflow execution is already running. WorkflowId: w, RunId: r1."
    )
    assert (error.workflow_id, error.run_id, error.start_request_id) == ("w", "r1", "req-1")


def test_ID2_repeated_request_returns_the_run_it_started() -> None:
    decision = resolve(RUNNING_R1, request_id="req-1")
    assert decision == WorkflowIdDecision(
        WorkflowIdAction.RETURN_EXISTING, "w", "r1", started=True
    )


def test_ID3_use_existing_returns_the_running_run() -> None:
    decision = resolve(RUNNING_R1, conflict=Conflict.USE_EXISTING)
    assert decision == WorkflowIdDecision(WorkflowIdAction.RETURN_EXISTING, "w", "r1")
    assert decision.started is False


def test_ID4_terminate_if_running_terminates_and_starts() -> None:
    decision = resolve(RUNNING_R1, reuse=Reuse.TERMINATE_IF_RUNNING)
    assert decision == WorkflowIdDecision(
        WorkflowIdAction.TERMINATE_EXISTING_AND_START,
        "w",
        "r1",
        started=True,
        new_run_id="r2",
        reason="TerminateIfRunning WorkflowIdReusePolicy",
        details="terminated by new runID: r2",
        identity="history-service",
    )
    assert decision.reason == TERMINATE_EXISTING_REASON
    assert decision.identity == HISTORY_SERVICE_IDENTITY


@pytest.mark.parametrize(("status", "reuse", "message"), [
    pytest.param(Status.COMPLETED, Reuse.ALLOW_DUPLICATE_FAILED_ONLY,
                 "Workflow execution already finished successfully. WorkflowId: w, RunId: r1."
                 " Workflow Id reuse policy: allow duplicate workflow Id if last run failed.",
                 id="ID5-completed-with-failed-only"),
    pytest.param(Status.FAILED, Reuse.REJECT_DUPLICATE,
                 "Workflow execution already finished. WorkflowId: w, RunId: r1."
                 " Workflow Id reuse policy: reject duplicate workflow Id.",
                 id="ID7-failed-with-reject-duplicate"),
])
def test_ID5_ID7_a_closed_run_the_reuse_policy_keeps_rejects_the_start(status, reuse, message) -> None:
    decision = resolve(CurrentRun("r1", status), reuse=reuse)
    assert decision.action is WorkflowIdAction.ALREADY_STARTED
    assert decision.message == message


def test_ID6_timed_out_with_failed_only_starts() -> None:
    decision = resolve(CurrentRun("r1", Status.TIMED_OUT), reuse=Reuse.ALLOW_DUPLICATE_FAILED_ONLY)
    assert decision == WorkflowIdDecision(WorkflowIdAction.START, "w", "r2", started=True)


def test_ID8_signal_with_start_delivers_to_the_running_run() -> None:
    decision = resolve(RUNNING_R1, signal_with_start=True)
    assert decision == WorkflowIdDecision(WorkflowIdAction.RETURN_EXISTING, "w", "r1")


# --- further cases ------------------------------------------------------------------


def test_unused_id_starts() -> None:
    assert resolve(None) == WorkflowIdDecision(WorkflowIdAction.START, "w", "r2", started=True)


def test_idempotency_applies_to_a_closed_run_too() -> None:
    closed = CurrentRun("r1", Status.COMPLETED, start_request_id="req-1")
    decision = resolve(closed, reuse=Reuse.REJECT_DUPLICATE, request_id="req-1")
    assert decision == WorkflowIdDecision(WorkflowIdAction.RETURN_EXISTING, "w", "r1", started=True)


def test_empty_request_id_never_matches() -> None:
    decision = resolve(CurrentRun("r1", Status.RUNNING), request_id="")
    assert decision.action is WorkflowIdAction.ALREADY_STARTED


@pytest.mark.parametrize("status", [s for s in Status if s and s is not Status.RUNNING])
def test_allow_duplicate_starts_after_any_closed_run(status) -> None:
    assert resolve(CurrentRun("r1", status)).action is WorkflowIdAction.START


@pytest.mark.parametrize(
    ("status", "action"),
    [
        (Status.FAILED, WorkflowIdAction.START),
        (Status.CANCELED, WorkflowIdAction.START),
        (Status.TERMINATED, WorkflowIdAction.START),
        (Status.TIMED_OUT, WorkflowIdAction.START),
        (Status.COMPLETED, WorkflowIdAction.ALREADY_STARTED),
        (Status.CONTINUED_AS_NEW, WorkflowIdAction.ALREADY_STARTED),
    ],
)
def test_failed_only_policy_by_status(status, action) -> None:
    decision = resolve(CurrentRun("r1", status), reuse=Reuse.ALLOW_DUPLICATE_FAILED_ONLY)
    assert decision.action is action


def test_only_rejections_carry_an_error() -> None:
    with pytest.raises(ValueError):
        resolve(None).error()


# --- id length ----------------------------------------------------------------------


def test_workflow_id_validation() -> None:
    assert MAX_ID_LENGTH == 1_000
    assert validate_workflow_id("w" * 1_000) == "w" * 1_000
    with pytest.raises(InvalidArgument) as info:
        validate_workflow_id("")
    assert str(info.value) == "WorkflowId is not set on request."
    with pytest.raises(InvalidArgument) as info:
        validate_workflow_id("w" * 1_001)
    assert str(info.value) == "WorkflowId exceeds maximum allowed length (1001/1000)"


def test_workflow_id_length_is_counted_in_utf8_bytes() -> None:
    assert validate_workflow_id("é" * 500)
    with pytest.raises(InvalidArgument) as info:
        validate_workflow_id("é" * 501)
    assert str(info.value) == "WorkflowId exceeds maximum allowed length (1002/1000)"
    with pytest.raises(InvalidArgument):
        validate_workflow_id("w" * 11, max_length=10)


# --- general rules ------------------------------------------------------------------

valid_policies = st.tuples(
    st.sampled_from(list(Reuse)), st.sampled_from(list(Conflict)), st.booleans()
).filter(
    lambda p: not (p[0] is Reuse.TERMINATE_IF_RUNNING and p[1] is not Conflict.UNSPECIFIED)
    and not (p[0] is Reuse.REJECT_DUPLICATE and p[1] is Conflict.TERMINATE_EXISTING)
    and not (p[2] and p[1] is Conflict.FAIL)
)
current_runs = st.one_of(
    st.none(),
    st.builds(
        CurrentRun,
        st.just("r1"),
        st.sampled_from([s for s in Status if s]),
        st.sampled_from(["req-1", "req-2"]),
    ),
)


@given(valid_policies, current_runs)
def test_decisions_are_consistent(policy_args, current) -> None:
    reuse, conflict, signal_with_start = policy_args
    policies = normalize_workflow_id_policies(reuse, conflict, signal_with_start=signal_with_start)
    assert policies.reuse not in (Reuse.UNSPECIFIED, Reuse.TERMINATE_IF_RUNNING)
    assert policies.conflict is not Conflict.UNSPECIFIED
    decision = resolve_duplicate_workflow_id(
        policies, workflow_id="w", request_id="req-2", new_run_id="r2", current=current
    )
    if current is None:
        assert decision.action is WorkflowIdAction.START
    elif current.start_request_id == "req-2":
        assert decision.action is WorkflowIdAction.RETURN_EXISTING and decision.started
    elif current.status is Status.RUNNING:
        # A running run is never left running next to a new one.
        assert decision.action is not WorkflowIdAction.START
        if decision.action is WorkflowIdAction.TERMINATE_EXISTING_AND_START:
            assert policies.conflict is Conflict.TERMINATE_EXISTING
    else:
        # A closed run is never terminated, and never returned in place of a new run.
        assert decision.action in (WorkflowIdAction.START, WorkflowIdAction.ALREADY_STARTED)
    if decision.action is WorkflowIdAction.ALREADY_STARTED:
        assert "WorkflowId: w, RunId: r1." in decision.message
        assert decision.error().run_id == "r1"
