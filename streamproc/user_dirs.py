"""Where streamproc keeps files of its own on a user's machine: the XDG base directories
(``$XDG_STATE_HOME``, ``$XDG_CACHE_HOME``), else their defaults under the home directory."""

from __future__ import annotations

import os
from pathlib import Path


def xdg_dir(var: str, fallback_under_home: str) -> Path:
    """The directory `var` names (e.g. ``XDG_STATE_HOME``), else ``~/<fallback_under_home>``."""
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback_under_home


def state_home() -> Path:
    """``$XDG_STATE_HOME/streamproc`` (``~/.local/state/streamproc`` by default)."""
    return xdg_dir("XDG_STATE_HOME", ".local/state") / "streamproc"


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/streamproc`` (``~/.cache/streamproc`` by default)."""
    return xdg_dir("XDG_CACHE_HOME", ".cache") / "streamproc"
