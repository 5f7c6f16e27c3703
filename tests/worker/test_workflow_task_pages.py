"""Putting a workflow task's history pages back together (no broker)."""

from __future__ import annotations

import pytest

from streamproc.worker.workflow_task_pages import TaskPageAssembler, one_record_task
from tests.support.workflow_tasks import RUN_KEY, after_completed_task, first_task_history, task_records


def long_history(activities: int) -> list[dict]:
    history = first_task_history()
    for n in range(activities):
        history = after_completed_task(history, ("ACTIVITY_TASK_SCHEDULED", {"activity_id": str(n)}))
    return history


def test_a_single_record_task_is_whole_at_once():
    history = first_task_history()
    task = TaskPageAssembler().add(task_records(history)[0])
    assert task is not None
    assert (task.key, task.workflow_id, task.run_id, task.workflow_type, task.scheduled_event_id,
            task.attempt) == (RUN_KEY, "wf-1", "run-1", "Order", 2, 1)
    assert task.history == history


def test_pages_give_the_whole_history_in_order_once_the_last_arrives():
    history = long_history(10)
    assembler = TaskPageAssembler()
    pages = task_records(history, pages=4)
    assert [assembler.add(p, 0, offset) for offset, p in enumerate(pages[:3])] == [None] * 3
    assert assembler.pending_offsets(0) == [0, 1, 2] and assembler.pending_offsets(1) == []
    task = assembler.add(pages[3], 0, 3)
    assert task.history == history and [e["event_id"] for e in task.history] == list(range(1, len(history) + 1))
    assert assembler.pending == 0 and assembler.pending_offsets(0) == []


def test_interleaved_pages_of_two_runs_are_kept_apart():
    a, b = long_history(3), long_history(5)
    pages_a, pages_b = task_records(a, pages=2, run_id="a"), task_records(b, pages=3, run_id="b")
    assembler = TaskPageAssembler()
    order = [pages_a[0], pages_b[0], pages_b[1], pages_a[1], pages_b[2]]
    done = [t for t in (assembler.add(p) for p in order) if t is not None]
    assert [(t.run_id, t.history) for t in done] == [("a", a), ("b", b)]


def test_a_task_whose_first_pages_came_before_this_worker_is_dropped_at_once():
    pages = task_records(long_history(6), pages=3)
    assembler = TaskPageAssembler()
    assert assembler.add(pages[1], 0, 10) is None and assembler.add(pages[2], 0, 11) is None
    assert assembler.dropped == 2 and assembler.pending == 0 and assembler.pending_offsets(0) == []


def test_a_task_written_again_starts_over_from_its_first_page():
    history = long_history(4)
    pages = task_records(history, pages=2)
    assembler = TaskPageAssembler()
    assert assembler.add(pages[0]) is None and assembler.add(pages[0]) is None
    assert assembler.dropped == 1
    assert assembler.add(pages[1]).history == history


def test_pending_tasks_are_bounded_and_forgotten_with_their_partition():
    assembler = TaskPageAssembler(max_pending=2)
    for n, run in enumerate(["a", "b", "c"]):
        assembler.add(task_records(long_history(2), pages=2, run_id=run)[0], n % 2, n)
    assert assembler.pending == 2 and assembler.dropped == 1
    assembler.forget_partitions({1})
    assert assembler.pending == 1 and assembler.pending_offsets(0) == [2]


@pytest.mark.parametrize("page, pages", [(2, 2), (-1, 2)])
def test_a_page_outside_its_range_is_refused(page, pages):
    record = task_records(first_task_history())[0]
    record.value.update(page=page, pages=pages)
    with pytest.raises(ValueError, match="page must be in"):
        TaskPageAssembler().add(record)


def test_a_handed_back_task_is_read_whole_from_its_one_record_and_a_page_is_refused():
    """Handed-back tasks are read on their own thread, with no assembler (whose pages are
    the task queue's thread's): the engine hands back only a task that fits one record."""
    history = long_history(4)
    assert one_record_task(task_records(history)[0]).history == history
    first_page = task_records(history, pages=2)[0]
    with pytest.raises(ValueError, match="one record, got 2 pages"):
        one_record_task(first_page)
