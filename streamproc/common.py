"""Temporal's ``temporalio.common`` names, for code that moves from Temporal by changing
its imports. Each name is the class streamproc defines elsewhere, not a copy::

    from streamproc.common import RetryPolicy, WorkflowIDReusePolicy
"""

from __future__ import annotations

from streamproc.semantics.retry import RetryPolicy
from streamproc.semantics.workflow_ids import QueryRejectCondition
from streamproc.semantics.workflow_ids import WorkflowIdConflictPolicy as WorkflowIDConflictPolicy
from streamproc.semantics.workflow_ids import WorkflowIdReusePolicy as WorkflowIDReusePolicy
from streamproc.unsupported import unsupported_names

__all__ = ["RetryPolicy", "WorkflowIDReusePolicy", "WorkflowIDConflictPolicy", "QueryRejectCondition"]

_SEARCH_ATTRIBUTES = "search attributes (workflows carry no indexed search attributes yet)"
__getattr__ = unsupported_names(__name__, {
    "SearchAttributeKey": _SEARCH_ATTRIBUTES,
    "SearchAttributePair": _SEARCH_ATTRIBUTES,
    "SearchAttributeUpdate": _SEARCH_ATTRIBUTES,
    "SearchAttributes": _SEARCH_ATTRIBUTES,
    "TypedSearchAttributes": _SEARCH_ATTRIBUTES,
    "SearchAttributeIndexedValueType": _SEARCH_ATTRIBUTES,
    "ActivityIDReusePolicy": "standalone activity id policies",
    "ActivityIDConflictPolicy": "standalone activity id policies",
    "RawValue": "raw payload values",
    "Priority": "task priorities",
    "MetricMeter": "SDK metric meters (workers export Prometheus metrics instead)",
    "VersioningBehavior": "worker versioning",
    "WorkerDeploymentVersion": "worker versioning",
    "VersioningOverride": "worker versioning",
    "HeaderCodecBehavior": "headers",
})
