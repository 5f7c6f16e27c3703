"""Checks shared by processors, answering with the reason a value is refused (or None)."""

from __future__ import annotations

from typing import Any

import orjson

from streamproc.semantics.errors import InvalidArgument


def check_json(text: Any, what: str, limit: int) -> str | None:
    if not isinstance(text, str):
        return f"{what} must be JSON text, got {type(text).__name__}"
    if len(text) > limit:
        return f"{what} is {len(text)} bytes, more than the limit of {limit}"
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return f"{what} is not valid JSON: {exc}"
    return None


def json_object(text: str | None, what: str) -> dict[str, Any]:
    """The JSON object in `text` ({} when empty); raises `InvalidArgument` naming `what`."""
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"{what} must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgument(f"{what} must be a JSON object, got {type(value).__name__}")
    return value
