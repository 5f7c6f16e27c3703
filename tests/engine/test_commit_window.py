"""The engine's commit window (`kafka/commit_window.py`), on a manual monotonic clock."""

from __future__ import annotations

import pytest

from streamproc.kafka.commit_window import CommitWindow


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_batch_after_a_quiet_spell_commits_at_once():
    ticks = Ticks()
    window = CommitWindow(5, ticks)
    assert window.left_s() == 0  # nothing began yet
    window.began()
    ticks.now += 0.050
    assert window.left_s() == 0


def test_a_batch_ready_within_the_interval_waits_for_the_rest_of_it():
    ticks = Ticks()
    window = CommitWindow(5, ticks)
    window.began()
    ticks.now += 0.002
    assert window.left_s() == pytest.approx(0.003)
    ticks.now += 0.003
    assert window.left_s() == 0


def test_off_by_default():
    ticks = Ticks()
    window = CommitWindow(monotonic=ticks)
    window.began()
    assert window.left_s() == 0


def test_a_negative_interval_is_refused():
    with pytest.raises(ValueError, match="must be >= 0 ms, got -1"):
        CommitWindow(-1)
