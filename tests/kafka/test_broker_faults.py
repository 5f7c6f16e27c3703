"""The engine survives faults of the broker: the two wedges of issue 14, reproduced and fixed.

Each test runs its own single-node broker (ports 29110-29119, state under tmp_path) and
stops it at the end; the suite's shared broker is never touched. The engine runs in a
thread of the test, so a commit can be hooked: made to hang inside the client, or to
find the broker killed right before it asks the coordinator to commit.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer

from streamproc.client import Client
from streamproc.devenv.broker import LocalBroker
from streamproc.kafka.recovery import FaultPolicy
from streamproc.kafka.config import consumer_config
from streamproc.kafka.errors import classify
from streamproc.protocol.topics import Topics
from streamproc.settings import Settings
from tests.support.engines import EngineThread, worker_process
from tests.support.history import EventLog, assert_jobs_completed_once

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

HEAP = "-Xms512m -Xmx512m"


def _broker(tmp_path, port: int) -> LocalBroker:
    return LocalBroker(port=port, controller_port=port + 1, state_dir=tmp_path / "kafka", heap=HEAP)


@pytest.fixture
def broker(request, tmp_path):
    broker = _broker(tmp_path, request.param)
    broker.start()
    yield broker
    broker.kill()  # its data goes with tmp_path


def _settings(broker: LocalBroker, tmp_path, engine_id: str = "faulty") -> Settings:
    return Settings(bootstrap=broker.bootstrap, namespace="faults", partitions=2,
                    state_dir=tmp_path / "state", engine_id=engine_id)


def _create_jobs(settings: Settings, first: int, count: int) -> None:
    with Client(settings.bootstrap, settings.namespace) as client:
        for i in range(first, first + count):
            client.create_job("flow", {"n": i}, request_id=f"job-{i}")
        client.flush()


class PacedJobs:
    """Creates jobs at a steady rate on a thread until stopped; a create during an outage
    waits in the client's queue and goes out when the broker is back."""

    def __init__(self, settings: Settings, per_second: float = 20) -> None:
        self.settings = settings
        self.per_second = per_second
        self.created = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> PacedJobs:
        self._thread.start()
        return self

    def _run(self) -> None:
        with Client(self.settings.bootstrap, self.settings.namespace) as client:
            while not self._stop.wait(1 / self.per_second):
                client.create_job("flow", {"n": self.created}, request_id=f"job-{self.created}")
                self.created += 1
            client.flush(300)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(330)
        return self.created


class CommitHook:
    """Wraps the engine's commit call: `action()` runs once, on the commit thread, right
    before the `nth` commit asks the broker for anything."""

    def __init__(self, engine, nth: int, action) -> None:
        self.real = engine._txn.commit_transaction
        self.nth = nth
        self.action = action
        self.calls = 0
        self.outcome: BaseException | None = None
        self.returned = threading.Event()
        engine._txn.commit_transaction = self

    def __call__(self, *args):
        self.calls += 1
        if self.calls != self.nth:
            return self.real(*args)
        self.action()
        try:  # with a deadline from now: the call must fail on its merits, not for lack of time
            return self.real(*args[:-1], time.monotonic() + 10)
        except BaseException as exc:
            self.outcome = exc
            raise
        finally:
            self.returned.set()


@pytest.mark.parametrize("broker", [29110], indirect=True)
def test_a_commit_that_hangs_in_the_client_is_abandoned_and_the_batch_rewound(broker, tmp_path):
    """Wedge 1: send_offsets_to_transaction blocked far past its timeout and the loop
    waited for it forever. Here the commit thread hangs in the commit call until the test
    lets it go: the engine abandons it at its deadline, replaces the producer and rewinds;
    the abandoned call, released afterwards, is fenced and changes nothing."""
    settings = _settings(broker, tmp_path)
    release = threading.Event()
    worker = worker_process(broker.bootstrap, settings.namespace, "flow", "w1", tmp_path)
    events = EventLog(broker.bootstrap, settings.namespace)
    faults = FaultPolicy(commit_margin_s=1.0)
    try:
        with EngineThread(settings, transaction_timeout_ms=5000, faults=faults) as engine:
            hook = CommitHook(engine, nth=3, action=lambda: release.wait(120))
            worker.start()
            _create_jobs(settings, 0, 300)
            started = time.monotonic()
            events.read_until(lambda e: e.count("COMPLETED") >= 300, timeout=90)
            assert hook.calls >= 3 and not hook.returned.is_set(), "the hooked commit was not reached"
            took = time.monotonic() - started
            assert engine.progress.failing_since is None  # recovered: a commit went through since
            release.set()  # the abandoned call goes on, on a producer whose epoch is stale
            assert hook.returned.wait(30)
            assert hook.outcome is not None, "the abandoned commit went through"
            print(f"\nthe abandoned commit, released: {hook.outcome!r} ({classify(hook.outcome, True).value})")
            _create_jobs(settings, 300, 100)
            events.read_until(lambda e: e.count("COMPLETED") >= 400, timeout=60)
            time.sleep(1)
            events.read_available()
            assert_jobs_completed_once(events, 400)
            print(f"\nall 300 jobs done {took:.1f} s after the first create, across a commit hung for good")
    finally:
        release.set()
        events.close()
        worker.stop()


@pytest.mark.parametrize("broker", [29112], indirect=True)
def test_a_broker_killed_inside_a_commit_and_restarted_10_s_later(broker, tmp_path):
    """Wedge 1 as issue 14 met it: the broker dies (SIGKILL) right when the commit thread
    is about to send the offsets; it is back 10 s later. The engine commits again within
    30 s of the restart, and every job completes exactly once."""
    settings = _settings(broker, tmp_path)
    worker = worker_process(broker.bootstrap, settings.namespace, "flow", "w1", tmp_path)
    events = EventLog(broker.bootstrap, settings.namespace)
    killed = threading.Event()

    def kill() -> None:
        broker.kill()
        killed.set()
    try:
        with EngineThread(settings) as engine:
            # The worker in its group first: a worker process that starts while the broker
            # is away checks for it for 10 s and exits, and the kill comes at the 5th commit.
            worker.start()
            worker.wait_for_log("tasks_assigned")
            hook = CommitHook(engine, nth=5, action=kill)
            jobs = PacedJobs(settings).start()
            assert killed.wait(60), "the hooked commit was not reached"
            time.sleep(10)
            broker.start()
            restarted, batches = time.monotonic(), engine.stats.batches
            while engine.stats.batches == batches:
                assert time.monotonic() - restarted < 30, f"no commit within 30 s of the restart: {engine.progress}"
                time.sleep(0.05)
            recovered_s = time.monotonic() - restarted
            time.sleep(2)
            count = jobs.stop()
            events.read_until(lambda e: e.count("COMPLETED") >= count, timeout=120)
            time.sleep(1)
            events.read_available()
            assert_jobs_completed_once(events, count)
            assert hook.returned.is_set()
            print(f"\nfirst commit {recovered_s:.1f} s after the broker restart")
    finally:
        events.close()
        worker.stop()


@pytest.mark.parametrize("broker", [29114], indirect=True)
def test_a_static_consumer_fenced_by_its_own_instance_id_rejoins(broker, tmp_path):
    """Wedge 2: the engine's consumer fenced by a member with its own group.instance.id
    (what its own rejoin does after a broker restart, when the first join's answer was
    lost). librdkafka marks the consumer fatal; the engine replaces it, gets its partitions
    back and goes on."""
    settings = _settings(broker, tmp_path)
    worker = worker_process(broker.bootstrap, settings.namespace, "flow", "w1", tmp_path)
    events = EventLog(broker.bootstrap, settings.namespace)
    topics = Topics(settings.namespace)
    try:
        with EngineThread(settings) as engine:
            worker.start()
            _create_jobs(settings, 0, 50)
            events.read_until(lambda e: e.count("COMPLETED") >= 50, timeout=60)
            first_consumer = engine._consumer
            # The previous incarnation: same group, same instance id, joins and so fences the engine's member.
            twin = Consumer(consumer_config(settings.bootstrap, topics.engine_group, **{
                "group.instance.id": settings.engine_id, "session.timeout.ms": 6000}))
            twin.subscribe([topics.commands])
            deadline = time.monotonic() + 30
            while not twin.assignment():
                assert time.monotonic() < deadline, "the twin never joined"
                twin.poll(0.2)
            twin.close()
            deadline = time.monotonic() + 30
            while engine._consumer is first_consumer or not engine.partitions:
                assert time.monotonic() < deadline, f"the fenced consumer was not replaced: {engine.progress}"
                time.sleep(0.1)
            _create_jobs(settings, 50, 50)
            events.read_until(lambda e: e.count("COMPLETED") >= 100, timeout=60)
            time.sleep(1)
            events.read_available()
            assert_jobs_completed_once(events, 100)
            assert engine.failure is None
    finally:
        events.close()
        worker.stop()


@pytest.mark.parametrize("broker", [29100], indirect=True)
def test_a_second_live_engine_with_the_same_id_makes_one_of_them_stop(broker, tmp_path):
    """Fenced by our own past is survived; fenced again and again is another live process
    with our identity: an engine stops with IdentityConflict (one clear line). The two fence
    each other at the same rate, so both may reach the limit in the same second and stop;
    one left running must go on without failing."""
    from streamproc.kafka.engine import Engine
    from streamproc.kafka.errors import IdentityConflict

    engines = [Engine(_settings(broker, tmp_path / name)) for name in ("a", "b")]
    outcomes: dict[int, BaseException | None] = {}

    def run(i: int) -> None:
        try:
            engines[i].run()
            outcomes[i] = None
        except IdentityConflict as exc:
            outcomes[i] = exc
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in (0, 1)]
    jobs = None
    try:
        threads[0].start()
        assert engines[0].ready.wait(60)
        jobs = PacedJobs(_settings(broker, tmp_path)).start()  # transactions keep the producers busy
        threads[1].start()
        deadline = time.monotonic() + 120
        while not outcomes:
            assert time.monotonic() < deadline, f"no engine stopped: {[e.progress for e in engines]}"
            time.sleep(0.2)
        time.sleep(10)
        for outcome in outcomes.values():
            assert isinstance(outcome, IdentityConflict) and "STREAMPROC_ENGINE_ID" in str(outcome)
        survivors = [i for i in (0, 1) if i not in outcomes]
        for i in survivors:
            assert threads[i].is_alive() and engines[i].failure is None
        print(f"\nengines stopped: {sorted('ab'[i] for i in outcomes)}; running on: {['ab'[i] for i in survivors]}")
    finally:
        if jobs is not None:
            jobs.stop()
        for e in engines:
            e.stop()
        for t in threads:
            t.join(60)


@pytest.mark.parametrize("broker", [29114], indirect=True)
def test_errors_that_are_not_kafka_errors_rewind_instead_of_ending_the_engine(broker, tmp_path, monkeypatch):
    """A restore that times out inside the rebalance callback (a TimeoutError, as the broker
    would give during an outage), then a RuntimeError in the middle of a step: each is
    rewound, the engine stays up and every job completes once."""
    from streamproc.kafka.engine import Engine

    settings = _settings(broker, tmp_path)
    real_restore, real_step = Engine._restore, Engine._step
    raised: list[str] = []

    def restore_times_out_once(self, db, pid):
        if "restore" not in raised:
            raised.append("restore")
            raise TimeoutError("changelog restore did not reach the end")
        return real_restore(self, db, pid)

    def step_fails_once(self):
        if "step" not in raised and self.stats.batches >= 3:
            raised.append("step")
            raise RuntimeError("something unexpected")
        return real_step(self)
    monkeypatch.setattr(Engine, "_restore", restore_times_out_once)
    monkeypatch.setattr(Engine, "_step", step_fails_once)
    worker = worker_process(broker.bootstrap, settings.namespace, "flow", "w1", tmp_path)
    events = EventLog(broker.bootstrap, settings.namespace)
    try:
        with EngineThread(settings) as engine:
            worker.start()
            _create_jobs(settings, 0, 200)
            events.read_until(lambda e: e.count("COMPLETED") >= 200, timeout=90)
            time.sleep(1)
            events.read_available()
            assert_jobs_completed_once(events, 200)
            assert raised == ["restore", "step"] and engine.failure is None
    finally:
        events.close()
        worker.stop()
