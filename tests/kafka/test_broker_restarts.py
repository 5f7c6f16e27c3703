"""The broker SIGKILLed under load and restarted, frozen, or away for two minutes: the engine and the
workers recover by themselves, and every job and workflow completes exactly once.

One engine process, a job worker and a workflow worker (`streamproc worker start`) run
against a single-node broker of the test's own (ports 29116-29119, state under tmp_path),
with jobs created at a steady rate and workflows started in slices. After each restart a
probe job and a probe workflow must complete within RECOVERY_S (120 s) of the broker
answering again: that is the engine, both workers and the client all back. The broker's
own stalls (seen in CI: a restarted broker silent for 26 s and then 31 s) are measured
apart, by a pulse of ApiVersions requests, and printed. At the end, from the events topic as a read_committed
reader sees it: every job created and completed once, every workflow completed once with
a well-formed history, and no event written twice.
"""

from __future__ import annotations

import collections
import json
import random
import time

import pytest

from streamproc.devenv.broker import LocalBroker
from tests.support.crash_chaos import worker_stat
from tests.support.fault_rig import RECOVERY_S, Rig

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _broker(tmp_path, port: int) -> LocalBroker:
    return LocalBroker(port=port, controller_port=port + 1, state_dir=tmp_path / "kafka", heap="-Xms512m -Xmx512m")


def _engine_log_lines(rig: Rig, since: int) -> list[dict]:
    lines = []
    for line in rig.engine.log_text()[since:].splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"event": line})  # not ours (librdkafka's own stderr): counted too
    return lines


def _faults_under_load(rig: Rig, seed: int, count: int, fault, probe_name: str, after_each=None,
                       after_start=None) -> list[float]:
    """`count` times, with workflows starting: `fault(rig)`, then a probe job and workflow
    must complete; returns the seconds each probe took. At the end, everything once."""
    rng = random.Random(seed)
    recoveries = []
    rig.start()
    if after_start is not None:
        after_start()
    rig.start_workflows("before", 40)
    for n in range(count):
        time.sleep(rng.uniform(1.0, 3.0))  # the fault finds transactions and workflows in flight
        rig.start_workflows(f"during-{n}", 20)
        mark, stalls_before = len(rig.engine.log_text()), len(rig.broker_stall_list())
        fault(rig)
        recoveries.append(round(rig.probe(f"{probe_name}-{n}", timeout=RECOVERY_S), 1))
        rig.assert_alive()
        if after_each is not None:
            after_each(n, _engine_log_lines(rig, mark), rig.broker_stall_list()[stalls_before:])
    rig.check_everything_once()
    return recoveries


def _kill_and_restart(rig: Rig) -> None:
    rig.broker.kill()
    time.sleep(10)
    rig.broker.start()


@pytest.mark.timeout(900)
def test_the_broker_sigkilled_under_load_5_times_and_back_after_10_s(tmp_path):
    rig = Rig(tmp_path, _broker(tmp_path, 29116))
    try:
        recoveries = _faults_under_load(rig, 20261124, 5, _kill_and_restart, "restart")
        print(f"\n5 broker restarts: engine and workers back (probe job and workflow done) after {recoveries} s; "
              f"{rig.jobs} jobs and {len(rig.workflow_ids)} workflows completed once each; activity attempts "
              f"that ran twice: {rig.attempts_run_twice}; starts the client gave up and asked again: "
              f"{rig.start_give_ups[:3]}; broker stalls: {rig.broker_stalls() or 'none'}")
    finally:
        rig.close()


@pytest.mark.timeout(900)
def test_the_broker_sigkilled_3_times_with_jobs_pushed_and_local_steps_journaled(tmp_path):
    """The paths that bypass the task topics: jobs started in their CREATE's transaction and
    pushed to the worker's stream, and local activities each journaled by the workflow worker's
    own producer before the next runs. A restart finds pushed jobs and journals in flight; the
    lease of the worker's stream ends while the broker is away (jobs then go through the topic)
    and push must come back by itself after each restart."""
    rig = Rig(tmp_path, _broker(tmp_path, 29116), push_jobs=True, journaled_local_steps=True)
    push_back: list[float] = []
    try:
        def push_is_back(*_) -> None:
            push_back.append(round(rig.wait_for_push(timeout=RECOVERY_S), 1))
        # Push is on before the first restart, so that each finds pushed jobs in flight.
        recoveries = _faults_under_load(rig, 20261128, 3, _kill_and_restart, "restart",
                                        after_start=push_is_back, after_each=push_is_back)
        pushed = rig.events.pushed_jobs()
        rig.flow_worker.stop()  # its last life logs what it journaled
        journaled = worker_stat([rig.flow_worker], "markers_journaled")
        print(f"\n3 broker restarts: back after {recoveries} s, push back after that {push_back[1:]} s; "
              f"{rig.jobs} jobs ({pushed} pushed) and {len(rig.workflow_ids)} workflows of local steps "
              f"completed once each; markers journaled by the worker's last life: {journaled}; "
              f"broker stalls: {rig.broker_stalls() or 'none'}")
        assert journaled > 0, "no marker was journaled: the path went untested"
    finally:
        rig.close()


@pytest.mark.timeout(900)
def test_the_broker_away_for_2_minutes(tmp_path):
    rig = Rig(tmp_path, _broker(tmp_path, 29118))
    try:
        rig.start()
        rig.start_workflows("before", 30)
        time.sleep(1.5)  # most of them are running when the broker goes
        mark = len(rig.engine.log_text())
        rig.broker.kill()
        killed = time.monotonic()
        while time.monotonic() - killed < 120:
            time.sleep(5)
            rig.assert_alive()
        outage = _engine_log_lines(rig, mark)
        kinds = collections.Counter(line.get("event") for line in outage)
        print(f"\nbroker away 120 s: {len(outage)} engine log lines meanwhile {dict(kinds)}")
        rig.broker.start()
        back = rig.probe("after", timeout=RECOVERY_S * 2)
        rig.start_workflows("after", 10)
        rig.check_everything_once()
        print(f"probe done {back:.1f} s after the restart; {rig.jobs} jobs and {len(rig.workflow_ids)} workflows "
              f"completed once each")
        assert len(outage) < 40, f"{len(outage)} engine log lines in a 2-minute outage: {dict(kinds)}"
        assert "engine_stalled" in kinds, "the outage was not reported"
    finally:
        rig.close()


def _freeze_for_20_s(rig: Rig) -> None:
    rig.broker.freeze()
    time.sleep(20)
    rig.broker.freeze(False)


#: A broker silence longer than any freeze these tests make themselves (20 s at most): its
#: JVM stopped by the machine (CI saw 26, 31 and 58 s; docs/faults.md). The engine's commits
#: fail all through it, and the watchdog's last resort after 60 s of failing is then what
#: it is for, not a sign that the engine missed the broker coming back.
NATURAL_STALL_S = 25.0


def _no_rebuild(n: int, engine_lines: list[dict], stalls: list[tuple[str, float, str]]) -> None:
    """The engine did not need the watchdog's last resort (new clients after 60 s of failing),
    unless the broker itself stalled longer than the test froze it (`NATURAL_STALL_S`).
    A rebuild asked for because the broker answered the watchdog's own client for 10 s while
    the engine still failed is the prompt path, not the last resort: printed, not failed."""
    kinds = collections.Counter(line.get("event") for line in engine_lines)
    rebuilds = [line for line in engine_lines if line.get("event") == "engine_clients_rebuild_requested"]
    natural = [(began, seconds) for began, seconds, _ in stalls if seconds > NATURAL_STALL_S]
    if natural:
        print(f"\nstall {n}: the broker itself was silent {natural}; rebuilds: {len(rebuilds)}")
        return
    assert all("broker_answering_s" in line for line in rebuilds), (
        f"stall {n}: the engine needed the watchdog's last resort: {dict(kinds)}")
    if rebuilds:
        print(f"\nstall {n}: clients replaced {rebuilds[0]['broker_answering_s']} s after the broker answered again")


@pytest.mark.timeout(600)
def test_the_broker_frozen_for_20_s_under_load_3_times(tmp_path):
    """A broker that stops answering without going away (its JVM stalled by its disk or host;
    CI saw 20-30 s stalls) and then goes on: the engine resumes its unfinished producer
    calls and replaces a consumer whose calls keep timing out or that is left out of its
    group, so it is back on its own, before the watchdog's last resort (new clients after
    60 s of failing)."""
    rig = Rig(tmp_path, _broker(tmp_path, 29116))
    try:
        recoveries = _faults_under_load(rig, 20261127, 3, _freeze_for_20_s, "thaw", after_each=_no_rebuild)
        print(f"\n3 broker stalls of 20 s: engine and workers back (probe job and workflow done) after "
              f"{recoveries} s of the broker going on; {rig.jobs} jobs and {len(rig.workflow_ids)} workflows "
              f"completed once each")
    finally:
        rig.broker.freeze(False)
        rig.close()



def _fencings(rig: Rig, since: int) -> int:
    """How often the controller fenced its broker for a lapsed session, in the broker log
    from byte `since` on."""
    with rig.broker.log_file.open("rb") as log_file:
        log_file.seek(since)
        return log_file.read().count(b"because its session has timed out")


def _freeze_past_its_session(rig: Rig) -> None:
    """Freeze the broker for 10 s and again for 4 s, each past its 3 s broker session, with
    50 ms between. After one freeze, a heartbeat the controller had received but not yet
    handled renews the session as the JVM goes on, and it is not fenced; in the 50 ms that
    heartbeat is handled, and the second freeze ends with no heartbeat in flight: the
    controller's session check, due in its own thread, comes before the broker's next one."""
    rig.broker.freeze()
    time.sleep(10)
    rig.broker.freeze(False)
    time.sleep(0.05)
    rig.broker.freeze()
    time.sleep(4)
    rig.broker.freeze(False)


def _crash_then_freeze_past_its_session(rig: Rig) -> None:
    """Crash; back after 5 s; then frozen until the controller in the same JVM fenced its
    own broker (every partition loses its leader), as in the CI run."""
    rig.broker.kill()
    time.sleep(5)
    rig.broker.start()
    since = rig.broker.log_file.stat().st_size
    for _ in range(3):
        _freeze_past_its_session(rig)
        time.sleep(1)
        if _fencings(rig, since):
            return
    raise AssertionError("frozen three times past its session and the broker was never fenced")


@pytest.mark.timeout(600)
def test_the_broker_frozen_past_its_session_right_after_a_crash_restart(tmp_path):
    """What a CI run saw after the 4th of 5 restarts (a 13 s stall right after it): the
    broker fenced by its own controller, 22 partitions leaderless. Once it goes on, its
    partitions have their leader again, and the engine and workers are back by themselves,
    before the watchdog's last resort (new clients after 60 s of failing): a producer whose
    init_transactions was caught by the stall never finished it on the same instance."""
    rig = Rig(tmp_path, _broker(tmp_path, 29116))
    try:
        recoveries = _faults_under_load(rig, 20261128, 1, _crash_then_freeze_past_its_session, "fenced",
                                        after_each=_no_rebuild)
        print(f"\nthe broker crashed, restarted, and fenced by a freeze: engine and workers back (probe job and "
              f"workflow done) after {recoveries} s of the broker going on; {rig.jobs} jobs and "
              f"{len(rig.workflow_ids)} workflows completed once each")
    finally:
        rig.broker.freeze(False)
        rig.close()


def _crash_then_stall_twice(rig: Rig) -> None:
    """What the CI run that failed saw after the 4th of 5 restarts: the restarted broker's JVM
    silent for 26 s, on for a moment, then silent again for 31 s (fenced by its controller
    each time). Here the stalls are SIGSTOPs."""
    _kill_and_restart(rig)
    rig.broker.freeze()
    time.sleep(26)
    rig.broker.freeze(False)
    time.sleep(2)
    rig.broker.freeze()
    time.sleep(31)
    rig.broker.freeze(False)


@pytest.mark.timeout(600)
def test_the_broker_stalled_twice_for_half_a_minute_right_after_a_crash_restart(tmp_path):
    """Once the broker goes on after the second stall, the engine and the workers are back by
    themselves. The engine's clients were seen stuck for seconds after the broker answered
    again; its watchdog replaces them once a client of its own gets answers while the engine
    still fails, not only after its 60 s last resort."""
    rig = Rig(tmp_path, _broker(tmp_path, 29116))
    recovered: list[str] = []

    def engine_recovery(n: int, engine_lines: list[dict], stalls: list) -> None:
        recovered.extend(f"{line.get('event')} {line.get('timestamp', '')[11:19]} {line.get('broker_answering_s', '')}"
                         for line in engine_lines
                         if line.get("event") in ("engine_clients_rebuild_requested", "engine_recovered"))
    try:
        recoveries = _faults_under_load(rig, 20261129, 1, _crash_then_stall_twice, "stalls",
                                        after_each=engine_recovery)
        print(f"\nthe broker crashed, restarted and stalled 26 s and 31 s: engine and workers back (probe job and "
              f"workflow done) after {recoveries} s of the broker answering again; engine: {recovered}; "
              f"{rig.jobs} jobs and {len(rig.workflow_ids)} workflows completed once each; "
              f"broker stalls: {rig.broker_stalls() or 'none'}")
    finally:
        rig.broker.freeze(False)
        rig.close()
