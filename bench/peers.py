"""`python bench/peers.py --vs restate,temporal`: the same phases on a peer and on streamproc, alternately.

For each phase, N pairs (default 3) of runs one after the other, never two at once: the
peer's bench (which starts its own server), then ours (`bench/run.py` with the scenario that
does the same work). One JSON line per run, one per pair with the ratios, and one summary
per phase with the median ratio over the pairs; progress and both sides' logs on stderr.

Phases (the peers' own names and sizes):
  a  1,000 workflows of one step, 100 in flight, each waited for  -> workflows/s, p50/p99
  b  200 workflows of 10 sequential steps, 100 in flight          -> steps/s (activities_per_sec)
  l  one workflow of one step at a time, 100 of them              -> p50/p99
Our side: against Restate, whose step (`ctx.run`) is a journaled side effect run in the
workflow's own process, local activities: `workflows_1_local_activity`,
`workflows_10_sequential_local` twice (each step on the log before the next, as `ctx.run`
is: --checkpoint-local-activities; then Temporal's mode, markers written when the task
completes), `workflow_latency_single_local`. Against Temporal, whose bench runs activities on
a task queue: `workflows_1_activity`, `workflows_10_sequential`, `workflow_latency_single`.

Every ratio is written so that above 1 means streamproc did better: ours / peer for a rate,
peer / ours for what is better lower (latency, CPU per workflow).

The peer's bench command (its python and bench.py, with any wrapper such as a network
namespace) comes from BENCH_PEER_RESTATE / BENCH_PEER_TEMPORAL, or --peer-bench for one
peer; this file adds `--only <phase>` and the sizes. With both peers, all of Restate's
phases run first, then Temporal's. Our runs use the broker STREAMPROC_BOOTSTRAP names,
or one started here for the whole comparison (idle while the peer runs: its CPU then is
reported as `streamproc_broker_cpu_seconds`), warmed up first by unmeasured runs of ours
until its JIT compiler is nearly idle (`bench/broker_jit.py`; each of our lines says how
much of the broker's CPU still went to compiling: `broker_jit_cpu_seconds`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.peer_results import PEER_PHASE_KEYS, ours_measurement, peer_measurement, ratios  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PEERS = ("restate", "temporal")
PHASES = "abl"
#: Our scenario for each phase, by peer: (mode, bench/run.py scenario, more run.py options).
OURS = {
    "restate": {
        "a": [("local", "workflows_1_local_activity", ())],
        "b": [("local_checkpointed", "workflows_10_sequential_local", ("--checkpoint-local-activities",)),
              ("local_markers_at_task_end", "workflows_10_sequential_local", ())],
        "l": [("local", "workflow_latency_single_local", ())],
    },
    "temporal": {
        "a": [("remote", "workflows_1_activity", ())],
        "b": [("remote", "workflows_10_sequential", ())],
        "l": [("remote", "workflow_latency_single", ())],
    },
}
#: Tiny sizes that only show the plumbing works (--smoke).
SMOKE = {"n": 20, "n_seq": 5, "latency_n": 5, "warmup": 5}
RUN_TIMEOUT_S = 1800


class RunFailed(Exception):
    pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--vs", required=True, metavar="PEER[,PEER]",
                        help=f"the peers, in order: {', '.join(PEERS)} or both comma-separated")
    parser.add_argument("--peer-bench", metavar="CMD",
                        help="the peer's bench command, e.g. '<venv>/bin/python <peers>/temporal/bench.py', "
                             "with one peer only (default $BENCH_PEER_RESTATE / $BENCH_PEER_TEMPORAL)")
    parser.add_argument("--phases", default=PHASES, help="which phases, in order (default abl)")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs per phase (default 3)")
    parser.add_argument("--n", type=int, default=1000, help="workflows of phase a (default 1000)")
    parser.add_argument("--n-seq", type=int, default=200, help="workflows of phase b (default 200)")
    parser.add_argument("--latency-n", type=int, default=100, help="workflows of phase l (default 100)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="unmeasured workflows first, both sides (default: each side's own)")
    parser.add_argument("--no-broker-warmup", action="store_true",
                        help="skip the unmeasured runs that first warm the broker (a fresh JVM) up")
    parser.add_argument("--smoke", action="store_true",
                        help=f"tiny sizes ({SMOKE}): shows the plumbing works, measures nothing")
    args = parser.parse_args()
    if args.smoke:
        for name, value in SMOKE.items():
            setattr(args, name, value)
    peers = [p.strip() for p in args.vs.split(",")]
    if any(p not in PEERS for p in peers) or len(set(peers)) != len(peers):
        parser.error(f"--vs takes {' or '.join(PEERS)}, or both comma-separated; got {args.vs!r}")
    if args.peer_bench and len(peers) > 1:
        parser.error("--peer-bench names one peer's command: with both, set BENCH_PEER_RESTATE and BENCH_PEER_TEMPORAL")
    commands = {p: args.peer_bench or os.environ.get(f"BENCH_PEER_{p.upper()}", "") for p in peers}
    for peer, command in commands.items():
        error = _invalid(args, peer, command)
        if error:
            parser.error(error)

    # Only JSON lines on stdout: whatever libraries print goes to stderr.
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(line: dict) -> None:
        os.write(result_fd, (json.dumps(line) + "\n").encode())

    from streamproc.devenv.broker_choice import ensure_broker

    bootstrap, broker = ensure_broker()
    try:
        if not args.no_broker_warmup:
            emit({"broker_warm_up_runs": _warm_broker(bootstrap, args.smoke)})
        return max([Comparison(args, peer, shlex.split(command), bootstrap, emit).run()
                    for peer, command in commands.items()])
    finally:
        if broker is not None and getattr(broker, "launched", True):
            broker.stop()


def _invalid(args: argparse.Namespace, peer: str, peer_command: str) -> str | None:
    if not peer_command.strip():
        return (f"no bench command for {peer}: set BENCH_PEER_{peer.upper()} or pass --peer-bench "
                f"(see docs/performance.md, 'Comparing with peers')")
    if not args.phases or set(args.phases) - set(PHASES):
        return f"--phases takes letters of {PHASES!r}, got {args.phases!r}"
    for name in ("pairs", "n", "n_seq", "latency_n"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1"
    if args.warmup is not None and args.warmup < 0:
        return "--warmup must be at least 0"
    return None


class Comparison:
    def __init__(self, args: argparse.Namespace, peer: str, peer_command: list[str], bootstrap: str, emit) -> None:
        self.args = args
        self.peer = peer
        self.peer_command = peer_command
        self.bootstrap = bootstrap
        self.emit = emit
        self.sizes = {"a": args.n, "b": args.n_seq, "l": args.latency_n}
        from bench.common import broker_pid

        self.broker_pid = broker_pid(bootstrap)
        self.failures = 0
        self.commit = _commit()

    def run(self) -> int:
        runs = sum(self.args.pairs * (1 + len(OURS[self.peer][p])) for p in self.args.phases)
        _say(f"{self.peer} vs streamproc: phases {self.args.phases}, {self.args.pairs} pairs each, {runs} runs, "
             f"sizes {self.sizes}, broker {self.bootstrap}")
        for phase in self.args.phases:
            by_mode: dict[str, list[dict]] = {mode: [] for mode, _, _ in OURS[self.peer][phase]}
            for pair in range(1, self.args.pairs + 1):
                peer = self._run_side(phase, pair, None)
                for mode, scenario, options in OURS[self.peer][phase]:
                    ours = self._run_side(phase, pair, (mode, scenario, options))
                    ratio = ratios(phase, peer, ours) if peer and ours else None
                    by_mode[mode].append(ratio)
                    self.emit({"vs": self.peer, "phase": phase, "pair": pair, "mode": mode, "ratios": ratio})
            for mode, pairs in by_mode.items():
                self.emit(_summary(self.peer, phase, mode, pairs))
        return 1 if self.failures else 0

    def _run_side(self, phase: str, pair: int, ours: tuple | None) -> dict | None:
        """One run: the peer's (ours None) or ours; its JSON line; the measurement, None if it failed."""
        side = "streamproc" if ours else self.peer
        head = {"vs": self.peer, "phase": phase, "pair": pair, "side": side,
                "when_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "load1_at_start": round(os.getloadavg()[0], 2)}
        if ours:
            head.update(mode=ours[0], scenario=ours[1])
        _say(f"phase {phase} pair {pair}: {side}{' ' + ours[0] if ours else ''}")
        started = time.monotonic()
        broker_before = _cpu_seconds(self.broker_pid)
        try:
            measurement = self._ours(phase, *ours[1:]) if ours else self._peer(phase)
        except RunFailed as exc:
            self.failures += 1
            self.emit({**head, "error": str(exc)})
            return None
        if not ours:
            measurement["streamproc_broker_cpu_seconds"] = round(_cpu_seconds(self.broker_pid) - broker_before, 2)
        self.emit({**head, **measurement, "wall_seconds": round(time.monotonic() - started, 1)})
        return measurement

    def _peer(self, phase: str) -> dict:
        command = [*self.peer_command, "--only", phase, "--n", str(self.sizes["a"]),
                   "--n-seq", str(self.sizes["b"]), "--latency-n", str(self.sizes["l"])]
        if self.args.warmup is not None:
            command += ["--warmup", str(self.args.warmup)]
        result = _json_of(command, dict(os.environ))
        if PEER_PHASE_KEYS[phase] not in result:
            raise RunFailed(f"{shlex.join(command)} printed no {PEER_PHASE_KEYS[phase]!r}")
        return peer_measurement(phase, result)

    def _ours(self, phase: str, scenario: str, options: tuple[str, ...]) -> dict:
        command = [sys.executable, str(REPO / "bench" / "run.py"), scenario,
                   "--workflows", str(self.sizes[phase]), *options]
        if self.args.warmup is not None:
            command += ["--warmup", str(self.args.warmup)]
        return {**ours_measurement(_json_of(command, {**os.environ, "STREAMPROC_BOOTSTRAP": self.bootstrap})),
                "commit": self.commit}


def _warm_broker(bootstrap: str, smoke: bool) -> list[dict]:
    """Unmeasured runs of ours first, until the broker's JIT compiler is nearly idle
    (`bench/broker_jit.py`): a broker just started is a cold JVM, and the peers' servers
    (Rust, Go) have nothing to warm up, so the first pairs would be unfair to us otherwise."""
    from bench.broker_jit import warm_broker
    from bench.common import broker_pid

    _say("warming the broker up (unmeasured runs of ours until its JIT compiler is nearly idle)")
    try:
        return warm_broker(bootstrap, broker_pid(bootstrap),
                           workflows=20 if smoke else 1000, max_runs=1 if smoke else None)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        _say(f"the warm-up failed (the comparison goes on): {exc}")
        return []


def _commit() -> str | None:
    """The commit of this checkout (with '+' when it has changes), to tell which code was measured."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "") if head.returncode == 0 else None


def _json_of(command: list[str], env: dict[str, str]) -> dict:
    """Run `command` (stderr passed through) and return the last JSON line it printed."""
    try:
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=None, timeout=RUN_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RunFailed(f"{shlex.join(command)}: {exc}") from None
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RunFailed(f"{shlex.join(command)} exited {done.returncode}"
                        f"{'' if lines else ' without a JSON line'} (its stderr is above)")
    try:
        return json.loads(lines[-1])
    except ValueError as exc:
        raise RunFailed(f"{shlex.join(command)}: its last line is not JSON ({exc})") from None


def _summary(peer: str, phase: str, mode: str, pairs: list[dict | None]) -> dict:
    """The median of each ratio over the pairs that ran, with every pair's value."""
    done = [p for p in pairs if p]
    keys = sorted({k for p in done for k in p})
    values = {k: [p.get(k) for p in done] for k in keys}
    return {"vs": peer, "phase": phase, "mode": mode, "summary": True, "pairs": len(done),
            "ratios_median": {k: round(statistics.median(v), 2) for k, v in values.items()
                              if v and None not in v},
            "ratios": values}


def _cpu_seconds(pid: int | None) -> float:
    from bench.common import pid_cpu_seconds

    return pid_cpu_seconds(pid)


def _say(*parts: object) -> None:
    print("[peers]", *parts, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
