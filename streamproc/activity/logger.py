"""`activity.logger`: a standard-library logger adapter that adds the running attempt's
details (activity id and type, attempt, task queue ...) to each line, as Temporal's.
Its logger is ``streamproc.activity``; configure it like any ``logging`` logger."""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from streamproc.activity.context import maybe_current

__all__ = ["LoggerAdapter", "logger"]


class LoggerAdapter(logging.LoggerAdapter):
    """Temporal's switches: ``activity_info_on_message`` (append the attempt's details to
    the message), ``activity_info_on_extra`` (``record.temporal_activity``) and
    ``full_activity_info_on_extra`` (``record.activity_info``: the whole `Info`)."""

    def __init__(self, logger: logging.Logger, extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(logger, extra or {})
        self.activity_info_on_message = True
        self.activity_info_on_extra = True
        self.full_activity_info_on_extra = False

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        context = maybe_current()
        if context is None:
            return msg, kwargs
        details = context.info.logger_details()
        extra = dict(kwargs.get("extra") or {})  # never change the caller's dict
        if self.activity_info_on_extra:
            extra["temporal_activity"] = details
        if self.full_activity_info_on_extra:
            extra["activity_info"] = context.info
        kwargs["extra"] = extra
        if self.activity_info_on_message:
            msg = f"{msg} ({details})"
        return msg, kwargs

    @property
    def base_logger(self) -> logging.Logger:
        """The logger underneath, to add handlers or formatters to."""
        return self.logger


#: The activity logger: the attempt's details on every line.
logger = LoggerAdapter(logging.getLogger("streamproc.activity"))
