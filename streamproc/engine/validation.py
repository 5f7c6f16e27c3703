"""Checks shared by processors, answering with the reason a value is refused (or None)."""

from __future__ import annotations

from typing import Any

import orjson


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
