"""Parsing of command-line values shared by the `streamproc` commands."""

from __future__ import annotations

from typing import Any

import click
import orjson


def json_value(text: str) -> Any:
    """A JSON value given on the command line; a click usage error if it is not JSON."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}") from None
