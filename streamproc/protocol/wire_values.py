"""Values as the SDK puts them in records: durations in whole milliseconds, retry policies.

Pure (no Kafka client): the workflow runtime encodes its commands with it too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streamproc.semantics import RetryPolicy

__all__ = ["ceil_ms", "retry_policy_record"]


def ceil_ms(value: timedelta) -> int:
    # Rounded up: a positive timeout under a millisecond must not become "none" (0).
    return -(-value // timedelta(milliseconds=1))


def retry_policy_record(policy: RetryPolicy) -> dict[str, Any]:
    """The RetryPolicyRecord of `policy`."""
    return {"initial_interval_ms": ceil_ms(policy.initial_interval),
            "backoff_coefficient": float(policy.backoff_coefficient),
            "maximum_interval_ms": ceil_ms(policy.maximum_interval),
            "maximum_attempts": policy.maximum_attempts,
            "non_retryable_error_types": list(policy.non_retryable_error_types)}
