"""Command-line switches shared by the benchmarks (argparse, nothing else imported: `run.py`
parses its arguments before it imports the rest)."""

from __future__ import annotations

import argparse


def add_worker_mode_options(parser: argparse.ArgumentParser) -> None:
    """The workers' opt-in modes that a benchmark can compare against their defaults."""
    parser.add_argument("--job-start-unconfirmed", action="store_true",
                        help="job workers run a handler as soon as START is sent, without the engine's answer, "
                             "so a quick handler's COMPLETE goes out with its START (the opt-in fast path that may "
                             "run a handler twice; job scenarios)")
    parser.add_argument("--job-push", action="store_true",
                        help="job workers register for pushed jobs (`worker run --push`): the engine starts a job "
                             "for a worker with free credit in the CREATE's transaction (job scenarios)")
    parser.add_argument("--engine-commit-interval-ms", type=float, default=0,
                        help="engines begin a transaction at most this often, a batch ready sooner taking in "
                             "what arrives meanwhile (`engine run --commit-interval-ms`; job scenarios; 0: off)")
    parser.add_argument("--no-eager-activities", action="store_true",
                        help="workflow workers send every activity through its task queue, none started on the "
                             "answering worker (workflow scenarios)")
    parser.add_argument("--checkpoint-local-activities", action="store_true",
                        help="workflow workers answer a task after each local activity, so each step is on the "
                             "log before the next runs (workflow scenarios; default: Temporal's way, one task)")
    parser.add_argument("--no-task-hand-back", action="store_true",
                        help="workflow workers take every workflow task from the task queue, none handed back "
                             "with the answer that made it (workflow scenarios)")
    parser.add_argument("--no-task-ride-along", action="store_true",
                        help="workflow workers never answer a run's next task with an activity's completion "
                             "(workflow scenarios)")
