"""`workflow.logger`: a standard-library logger adapter that adds the run's identity to each
line and stays silent while the code replays history, as Temporal's.

Replay re-executes code that already ran (on another worker, or before a cache eviction);
logging there would repeat every line once per workflow task. Configure it like any
``logging`` logger (its name is ``streamproc.workflow``)::

    logging.basicConfig(level=logging.INFO)
    workflow.logger.info("charging %s", order_id)
    # INFO:streamproc.workflow:charging o-1 ({'attempt': 1, 'namespace': ..., 'workflow_id': ...})
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from streamproc.workflow.current import maybe_current_runtime

__all__ = ["LoggerAdapter", "logger"]


class LoggerAdapter(logging.LoggerAdapter):
    """Temporal's switches: ``workflow_info_on_message`` (append the run's details to the
    message), ``workflow_info_on_extra`` (``record.temporal_workflow``),
    ``full_workflow_info_on_extra`` (``record.workflow_info``: the whole `Info`) and
    ``log_during_replay`` (off: replayed code logs nothing)."""

    def __init__(self, logger: logging.Logger, extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(logger, extra or {})
        self.workflow_info_on_message = True
        self.workflow_info_on_extra = True
        self.full_workflow_info_on_extra = False
        self.log_during_replay = False

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        runtime = maybe_current_runtime()
        if runtime is None:
            return msg, kwargs
        details = runtime.info.logger_details()
        extra: dict[str, Any] = {}
        if self.workflow_info_on_extra:
            extra["temporal_workflow"] = details
        if self.full_workflow_info_on_extra:
            extra["workflow_info"] = runtime.info
        kwargs["extra"] = {**extra, **(kwargs.get("extra") or {})}
        if self.workflow_info_on_message:
            msg = f"{msg} ({details})"
        return msg, kwargs

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 - logging's name
        runtime = maybe_current_runtime()
        if runtime is not None and runtime.replaying and not self.log_during_replay:
            return False
        return super().isEnabledFor(level)

    @property
    def base_logger(self) -> logging.Logger:
        """The logger underneath, to add handlers or formatters to."""
        return self.logger


#: The workflow logger: run details on every line, nothing while replaying.
logger = LoggerAdapter(logging.getLogger("streamproc.workflow"))
