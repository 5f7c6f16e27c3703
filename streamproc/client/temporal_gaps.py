"""What of the Temporal Python SDK's client and worker surface streamproc does not implement.

A Temporal program moved to streamproc that uses one of these gets a NotImplementedError
naming the option or method and the feature it belongs to, never a TypeError about an
unexpected keyword or an AttributeError deep inside. A name in none of these tables (a
typo) stays the ordinary TypeError / AttributeError.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["CONNECT_OPTIONS", "START_OPTIONS", "LIST_OPTIONS", "WORKER_OPTIONS", "CLIENT_METHODS",
           "refuse_options", "missing_methods"]

_KAFKA_SECURITY = "connection security: set STREAMPROC_KAFKA_* properties (README, Secured clusters)"

#: `Client.connect` options of Temporal's (a gRPC client) with no meaning or no equivalent here.
CONNECT_OPTIONS = {
    "tls": _KAFKA_SECURITY, "api_key": _KAFKA_SECURITY, "rpc_metadata": "gRPC metadata",
    "lazy": "lazy connections", "retry_config": "gRPC retry configuration",
    "keep_alive_config": "gRPC keep-alive", "http_connect_proxy_config": "HTTP CONNECT proxies",
    "runtime": "SDK runtimes", "interceptors": "interceptors", "plugins": "plugins",
    "default_workflow_query_reject_condition": "a client-wide query reject condition",
    "header_codec_behavior": "header codecs",
}

#: `start_workflow` / `execute_workflow` options.
START_OPTIONS = {
    "request_eager_start": "eager workflow start",
    "priority": "task priorities", "versioning_override": "worker versioning",
    "static_summary": "user metadata", "static_details": "user metadata", "rpc_metadata": "gRPC metadata",
    "links": "Nexus links", "callbacks": "Nexus callbacks",
}

#: `list_workflows` options.
LIST_OPTIONS = {"query": "visibility queries (every run the events topic holds is listed)",
                "next_page_token": "visibility paging", "rpc_metadata": "gRPC metadata"}

#: `Worker` options.
WORKER_OPTIONS = {
    "interceptors": "interceptors", "build_id": "worker versioning", "use_worker_versioning": "worker versioning",
    "deployment_config": "worker deployments", "workflow_runner": "workflow sandboxes (there is none)",
    "unsandboxed_workflow_runner": "workflow sandboxes (there is none)", "debug_mode": "workflow sandboxes",
    "tuner": "slot suppliers", "max_concurrent_local_activities": "a limit on concurrent local activities",
    "max_concurrent_workflow_task_polls": "poller tuning", "max_concurrent_activity_task_polls": "poller tuning",
    "workflow_task_poller_behavior": "poller tuning", "activity_task_poller_behavior": "poller tuning",
    "nonsticky_to_sticky_poll_ratio": "poller tuning", "max_activities_per_second": "activity rate limits",
    "max_task_queue_activities_per_second": "activity rate limits",
    "workflow_failure_exception_types": "custom workflow failure exception types",
    "disable_safe_workflow_eviction": "workflow eviction tuning",
    "sticky_queue_schedule_to_start_timeout": "sticky queue timeouts",
    "max_heartbeat_throttle_interval": "heartbeat throttle settings",
    "default_heartbeat_throttle_interval": "heartbeat throttle settings",
    "nexus_service_handlers": "Nexus", "nexus_task_executor": "Nexus", "shared_state_manager": "multiprocess activities",
    "on_fatal_error": "fatal error callbacks", "workflow_task_executor": "a workflow task executor",
}

#: `Client` methods.
CLIENT_METHODS = {
    "start_update_with_start_workflow": "update-with-start", "execute_update_with_start_workflow": "update-with-start",
    "workflow_service": "gRPC services (Kafka is the transport)", "operator_service": "gRPC services",
    "test_service": "gRPC services", "service_client": "gRPC services",
    "update_worker_build_id_compatibility": "worker versioning", "get_worker_build_id_compatibility": "worker versioning",
    "get_worker_task_reachability": "worker versioning",
}

def refuse_options(where: str, given: Mapping[str, Any], gaps: Mapping[str, str]) -> None:
    """NotImplementedError for the first of Temporal's options in `given` (None counts as not
    given: it is their default); TypeError for a name Temporal does not have either."""
    for name, value in given.items():
        if name not in gaps:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
        if value is not None:
            raise NotImplementedError(f"{name} is not implemented by streamproc's {where} ({gaps[name]}; "
                                      f"see docs/temporal-compatibility.md)")


def missing_methods(where: str, gaps: Mapping[str, str]) -> Callable[[Any, str], Any]:
    """A class ``__getattr__`` (called only for names the class lacks) naming what is missing."""

    def __getattr__(self: Any, name: str) -> Any:
        feature = gaps.get(name)
        if feature is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise NotImplementedError(f"{where}.{name} is not implemented by streamproc ({feature}; "
                                  f"see docs/temporal-compatibility.md)")

    return __getattr__
