"""`--output table|json|jsonl`, the same on every command that prints data, and its printers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
import orjson

OUTPUT = click.option(
    "--output", "-o", type=click.Choice(["table", "json", "jsonl"]), default="table", show_default=True,
    help="table: for people; json: one JSON document; jsonl: one JSON object a line (a list item by item).")


def echo_json(value: Any, output: str = "json") -> None:
    """`value` as one indented JSON document, or for ``jsonl`` one compact line (a list:
    one line per item), which `jq -c` and log shippers read a line at a time."""
    if output == "jsonl":
        for item in value if isinstance(value, list) else [value]:
            click.echo(orjson.dumps(item, default=str, option=orjson.OPT_NON_STR_KEYS).decode())
    else:
        click.echo(orjson.dumps(value, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def echo_table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> None:
    """Columns padded to their widest cell; None prints as nothing."""
    cells = [list(header)] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
