"""Temporal retry policies: defaults, validation, classification and decisions.

Everything here is a pure function of its arguments. The order of checks, the error
texts and the integer arithmetic follow the Temporal server, because workflows
written against Temporal depend on them (for instance that a policy with
``maximum_attempts=1`` is accepted whatever its other fields hold).

Attempts are 1-based and count the first execution: ``maximum_attempts=3`` means one
try and two retries; ``0`` means unlimited. The interval arithmetic itself lives in
:mod:`streamproc.semantics.backoff`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from streamproc.semantics.backoff import RetryDecision, next_backoff_interval
from streamproc.semantics.durations import (
    ZERO,
    from_nanoseconds,
    saturate_int64,
    to_nanoseconds,
    validate_and_cap,
    wrap_int64,
)
from streamproc.semantics.enums import RetryState, TimeoutType
from streamproc.semantics.errors import InvalidArgument
from streamproc.semantics.failures import (
    ApplicationFailure,
    CanceledFailure,
    Failure,
    ServerFailure,
    TerminatedFailure,
    TimeoutFailure,
)

__all__ = [
    "TIMEOUT_FAILURE_TYPE_PREFIX",
    "RetrySettings",
    "DEFAULT_RETRY_SETTINGS",
    "RetryPolicy",
    "ensure_retry_defaults",
    "validate_retry_policy",
    "normalize_activity_retry_policy",
    "normalize_workflow_retry_policy",
    "is_retryable_failure",
    "next_retry_delay",
    "activity_retry_decision",
    "workflow_retry_decision",
]

#: ``non_retryable_error_types`` entries with this prefix name a timeout type.
TIMEOUT_FAILURE_TYPE_PREFIX = "TemporalTimeout:"


@dataclass(frozen=True)
class RetrySettings:
    """Namespace defaults used to fill unset policy fields.

    Mirrors ``history.defaultActivityRetryPolicy`` / ``history.defaultWorkflowRetryPolicy``.
    ``maximum_interval_coefficient`` is truncated to an integer before use, as the
    server converts it to a ``time.Duration`` multiplier.
    """

    initial_interval: timedelta = timedelta(seconds=1)
    maximum_interval_coefficient: float = 100.0
    backoff_coefficient: float = 2.0
    maximum_attempts: int = 0


DEFAULT_RETRY_SETTINGS = RetrySettings()


@dataclass(frozen=True)
class RetryPolicy:
    """A retry policy as a user wrote it; zero means "unset" for every field.

    Use :func:`normalize_activity_retry_policy` or :func:`normalize_workflow_retry_policy`
    to obtain the defaulted, validated policy the engine records and applies.
    """

    initial_interval: timedelta = ZERO
    backoff_coefficient: float = 0.0
    maximum_interval: timedelta = ZERO
    maximum_attempts: int = 0
    non_retryable_error_types: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        types = self.non_retryable_error_types
        if isinstance(types, str):
            # A bare string would silently become a tuple of characters.
            raise TypeError(
                f"non_retryable_error_types must be a sequence of strings, got the string {types!r}"
            )
        object.__setattr__(self, "non_retryable_error_types", tuple(types))


# --- defaults and validation (SEMANTICS.md 1.1, 1.2) ---------------------------------


def ensure_retry_defaults(
    policy: RetryPolicy, settings: RetrySettings = DEFAULT_RETRY_SETTINGS
) -> RetryPolicy:
    """Fill unset fields field by field; does not validate.

    ``maximum_interval`` defaults to ``int(coefficient) x initial_interval`` computed on
    int64 nanoseconds *after* ``initial_interval`` was defaulted, wrapping on overflow
    exactly like Go (only reachable with an initial interval of about three years).
    """
    initial = policy.initial_interval
    if initial == ZERO:
        initial = settings.initial_interval
    maximum = policy.maximum_interval
    if maximum == ZERO:
        multiplier = int(settings.maximum_interval_coefficient)
        maximum = from_nanoseconds(
            wrap_int64(multiplier * saturate_int64(to_nanoseconds(initial)))
        )
    coefficient = policy.backoff_coefficient
    if coefficient == 0:
        coefficient = settings.backoff_coefficient
    attempts = policy.maximum_attempts
    if attempts == 0:
        attempts = settings.maximum_attempts
    return replace(
        policy,
        initial_interval=initial,
        maximum_interval=maximum,
        backoff_coefficient=coefficient,
        maximum_attempts=attempts,
    )


def validate_retry_policy(policy: RetryPolicy) -> RetryPolicy:
    """Check a defaulted policy; return it with durations capped at 100 years.

    Checks run in the server's order and stop at the first failure. A policy with
    ``maximum_attempts == 1`` never retries, so nothing else is checked (or capped).

    Raises :class:`InvalidArgument` with the server's message.
    """
    if policy.maximum_attempts == 1:
        return policy
    initial = validate_and_cap(
        policy.initial_interval, "invalid InitialInterval set on retry policy"
    )
    # Written as "< 1" on purpose: like Go, a NaN coefficient passes this check (and
    # then behaves as "always maximum_interval", see exponential_backoff_ns).
    if policy.backoff_coefficient < 1:
        raise InvalidArgument("BackoffCoefficient cannot be less than 1 on retry policy.")
    maximum = validate_and_cap(
        policy.maximum_interval, "invalid MaximumInterval set on retry policy"
    )
    if maximum > ZERO and maximum < initial:
        raise InvalidArgument(
            "MaximumInterval cannot be less than InitialInterval on retry policy."
        )
    if policy.maximum_attempts < 0:
        raise InvalidArgument("MaximumAttempts cannot be negative on retry policy.")
    for error_type in policy.non_retryable_error_types:
        if error_type.startswith(TIMEOUT_FAILURE_TYPE_PREFIX):
            suffix = error_type[len(TIMEOUT_FAILURE_TYPE_PREFIX) :]
            try:
                timeout_type = TimeoutType.from_name(suffix)
            except ValueError:
                timeout_type = TimeoutType.UNSPECIFIED
            if timeout_type is TimeoutType.UNSPECIFIED:
                raise InvalidArgument(f"Invalid timeout type value: {suffix}.")
    return replace(policy, initial_interval=initial, maximum_interval=maximum)


def normalize_activity_retry_policy(
    policy: RetryPolicy | None, settings: RetrySettings = DEFAULT_RETRY_SETTINGS
) -> RetryPolicy:
    """The policy recorded on ``ActivityTaskScheduled``.

    Activities always get one: a missing policy becomes an empty one, so an activity
    without a policy retries forever (1 s, 2 s, 4 s ... capped at 100 s).
    """
    if policy is None and settings is DEFAULT_RETRY_SETTINGS:
        return _DEFAULT_ACTIVITY_POLICY  # the same every time (frozen): made once
    return validate_retry_policy(ensure_retry_defaults(policy or RetryPolicy(), settings))


_DEFAULT_ACTIVITY_POLICY = validate_retry_policy(ensure_retry_defaults(RetryPolicy(), DEFAULT_RETRY_SETTINGS))


def normalize_workflow_retry_policy(
    policy: RetryPolicy | None, settings: RetrySettings = DEFAULT_RETRY_SETTINGS
) -> RetryPolicy | None:
    """The policy recorded for a workflow run; ``None`` stays ``None`` (no retries)."""
    if policy is None:
        return None
    return validate_retry_policy(ensure_retry_defaults(policy, settings))


# --- classification (1.3, 1.5) -------------------------------------------------------


def is_retryable_failure(failure: Failure | None, non_retryable_error_types: tuple[str, ...]) -> bool:
    """Whether ``failure`` may be retried under a policy with these non-retryable types.

    Only the top-level failure is examined; causes are ignored, so a wrapper such as
    :class:`~streamproc.semantics.failures.ActivityFailure` is always retryable.
    Application types match whole and case-sensitively. A timeout matches the list
    only in its ``TemporalTimeout:<ShortName>`` spelling, even though validation also
    accepts ``TemporalTimeout:TIMEOUT_TYPE_...``.
    """
    if failure is None:
        return True
    if isinstance(failure, (TerminatedFailure, CanceledFailure)):
        return False
    if isinstance(failure, TimeoutFailure):
        if failure.timeout_type in (TimeoutType.START_TO_CLOSE, TimeoutType.HEARTBEAT):
            marker = TIMEOUT_FAILURE_TYPE_PREFIX + failure.timeout_type.short_name
            return marker not in non_retryable_error_types
        return False
    if isinstance(failure, ServerFailure):
        return not failure.non_retryable
    if isinstance(failure, ApplicationFailure):
        if failure.non_retryable:
            return False
        return failure.type not in non_retryable_error_types
    return True


def next_retry_delay(failure: Failure | None) -> timedelta | None:
    """The delay an application failure asks for, or ``None`` if it sets none."""
    if isinstance(failure, ApplicationFailure):
        return failure.next_retry_delay
    return None


# --- decisions (1.6, 1.7) ------------------------------------------------------------


def activity_retry_decision(
    policy: RetryPolicy | None,
    *,
    attempt: int,
    failure: Failure | None,
    now: datetime,
    expiration: datetime | None,
    cancel_requested: bool = False,
) -> RetryDecision:
    """Whether a failed or timed-out activity attempt is retried, and after how long.

    ``expiration`` is the activity's first scheduled time plus its schedule-to-close
    timeout (``None`` without one). A worker's ``next_retry_delay`` replaces both the
    computed interval and the ``maximum_interval`` cap, so it may exceed the cap; an
    explicit zero delay therefore ends the activity with ``TIMEOUT``.
    """
    if policy is None:
        return RetryDecision(RetryState.RETRY_POLICY_NOT_SET)
    if cancel_requested:
        return RetryDecision(RetryState.CANCEL_REQUESTED)
    if isinstance(failure, TimeoutFailure) and failure.timeout_type in (
        TimeoutType.SCHEDULE_TO_START,
        TimeoutType.SCHEDULE_TO_CLOSE,
    ):
        return RetryDecision(RetryState.TIMEOUT)
    if not is_retryable_failure(failure, policy.non_retryable_error_types):
        return RetryDecision(RetryState.NON_RETRYABLE_FAILURE)
    override = next_retry_delay(failure)
    return next_backoff_interval(
        now=now,
        attempt=attempt,
        maximum_attempts=policy.maximum_attempts,
        initial_interval=policy.initial_interval,
        maximum_interval=policy.maximum_interval if override is None else override,
        backoff_coefficient=policy.backoff_coefficient,
        expiration=expiration,
        override_delay=override,
    )


def workflow_retry_decision(
    policy: RetryPolicy | None,
    *,
    attempt: int,
    failure: Failure | None,
    now: datetime,
    execution_expiration: datetime | None,
) -> RetryDecision:
    """Whether a failed or run-timed-out workflow run is retried as a new run.

    ``attempt`` is the failed run's attempt number, ``execution_expiration`` the chain's
    absolute deadline. Unlike activities, a ``next_retry_delay`` is still capped at
    ``maximum_interval`` (and a zero delay becomes ``maximum_interval``).
    """
    if policy is None:
        return RetryDecision(RetryState.RETRY_POLICY_NOT_SET)
    if not is_retryable_failure(failure, policy.non_retryable_error_types):
        return RetryDecision(RetryState.NON_RETRYABLE_FAILURE)
    return next_backoff_interval(
        now=now,
        attempt=attempt,
        maximum_attempts=policy.maximum_attempts,
        initial_interval=policy.initial_interval,
        maximum_interval=policy.maximum_interval,
        backoff_coefficient=policy.backoff_coefficient,
        expiration=execution_expiration,
        override_delay=next_retry_delay(failure),
    )
