"""What every scenario needs: a broker, engine and worker processes, an events tap, statistics."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from streamproc.protocol import codec
from streamproc.protocol.topics import Topics

REPO = Path(__file__).resolve().parents[1]
RECORD_TYPES = ("COMMAND", "EVENT", "COMMAND_REJECTION")


def say(*parts: object) -> None:
    print("[bench]", *parts, file=sys.stderr, flush=True)


def now_ms() -> float:
    return time.time() * 1000


class Bench:
    """A broker, a fresh namespace, a work directory for logs and state, and the processes started."""

    def __init__(self, scenario: str) -> None:
        from streamproc.devenv.broker_choice import ensure_broker  # another module of the project

        self.bootstrap, self.broker = ensure_broker()
        #: The local broker's process (its CPU is measured), None for a remote one.
        self.broker_pid = broker_pid(self.bootstrap)
        self.scenario = scenario.replace("_", "-")
        self.dir = Path(tempfile.mkdtemp(prefix="streamproc-bench-"))
        self.procs: list[subprocess.Popen] = []
        self.namespaces: list[str] = []
        #: Extra `streamproc worker run` options of the job workers this bench starts.
        self.job_worker_options: tuple[str, ...] = ()
        #: Extra `streamproc engine run` options of the engines it starts (e.g. --commit-interval-ms).
        self.engine_options: tuple[str, ...] = ()
        #: Engines and job workers serve Prometheus metrics (each on a free port).
        self.metrics = False
        #: Workflow scenarios read the broker's request meters around the measured runs (JMX).
        self.broker_requests = False
        say(f"broker {self.bootstrap}{' (started here)' if self.broker else ''}, logs in {self.dir}")
        self.fresh_namespace()

    def fresh_namespace(self, tag: str = "") -> str:
        """Switch to a new random namespace: its own topics, so runs never see each other."""
        self.namespace = f"bench-{self.scenario}{'-' + tag if tag else ''}-{uuid.uuid4().hex[:8]}"
        self.topics = Topics(self.namespace)
        self.namespaces.append(self.namespace)
        say(f"namespace {self.namespace}")
        return self.namespace

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(STREAMPROC_BOOTSTRAP=self.bootstrap, STREAMPROC_NAMESPACE=self.namespace,
                   STREAMPROC_LOG_FORMAT="json", PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
        env.update(extra)
        return env

    def spawn(self, args: list[str], env: dict[str, str], log_name: str) -> subprocess.Popen:
        with open(self.dir / log_name, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "streamproc", *args], env=env, cwd=REPO,
                                    stdout=out, stderr=subprocess.STDOUT)
        proc.log_path = self.dir / log_name
        self.procs.append(proc)
        return proc

    def engine(self, engine_id: str, partitions: int, state_dir: Path | None = None) -> subprocess.Popen:
        state_dir = state_dir or self.dir / f"state-{engine_id}"
        env = self.env(STREAMPROC_ENGINE_ID=engine_id, STREAMPROC_PARTITIONS=str(partitions),
                       STREAMPROC_STATE_DIR=str(state_dir))
        return self.spawn(["engine", "run", *self.engine_options, *self._metrics_option()], env,
                          f"engine-{engine_id}.log")

    @contextlib.contextmanager
    def running_engine(self, name: str, partitions: int) -> Iterator[subprocess.Popen]:
        """An engine process (id `name` and a random suffix) once it owns its partitions;
        stopped at the end."""
        with self.running_engines(name, partitions, 1) as engines:
            yield engines[0]

    @contextlib.contextmanager
    def running_engines(self, name: str, partitions: int, count: int) -> Iterator[list[subprocess.Popen]]:
        """`count` engine processes sharing `partitions`, once their group is stable with
        every partition owned; stopped at the end."""
        run = uuid.uuid4().hex[:6]
        engines = []
        try:
            for n in range(count):
                engines.append(self.engine(f"{name}-{run}" if count == 1 else f"{name}-{run}-{n}", partitions))
            wait_log(engines[0], "partitions_assigned", 90)
            if count > 1:
                wait_group_stable(self, self.topics.engine_group, count, partitions, 90)
            yield engines
        finally:
            for engine in engines:
                stop(engine)

    def worker(self, queue: str, worker_id: str, handler: str = "bench.handlers:noop") -> subprocess.Popen:
        """A job worker process, with `job_worker_options` (e.g. --start-unconfirmed)."""
        return self.spawn(["worker", "run", queue, "--handler", handler, "--worker-id", worker_id,
                           *self.job_worker_options, *self._metrics_option()], self.env(), f"worker-{worker_id}.log")

    def _metrics_option(self) -> list[str]:
        if not self.metrics:
            return []
        with socket.socket() as s:  # a free port (released again for the process to take)
            s.bind(("127.0.0.1", 0))
            return ["--metrics-port", str(s.getsockname()[1])]

    def close(self, keep_topics: bool = False) -> None:
        for proc in self.procs:
            stop(proc)
        if not keep_topics:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            names = [t for t in admin.list_topics(timeout=10).topics
                     if any(t.startswith(ns + ".") for ns in self.namespaces)]
            groups = [g.group_id for g in admin.list_consumer_groups().result(10).valid
                      if any(g.group_id.startswith(ns + ".") for ns in self.namespaces)]
            futures = [*(admin.delete_topics(names, operation_timeout=30).values() if names else ()),
                       *(admin.delete_consumer_groups(groups).values() if groups else ())]
            for future in futures:
                try:
                    future.result(30)
                except Exception:  # noqa: BLE001 - best effort
                    pass
        if self.broker is not None and getattr(self.broker, "launched", True):
            self.broker.stop()
        for state in self.dir.glob("state-*"):  # engines' RocksDB copies; the logs stay
            shutil.rmtree(state, ignore_errors=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(20)


def log_lines(proc: subprocess.Popen) -> list[dict]:
    out = []
    for line in proc.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def wait_log(proc: subprocess.Popen, event: str, timeout: float = 60, count: int = 1) -> list[dict]:
    """Wait until the process has logged `event` `count` times; returns those log lines."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in log_lines(proc) if line.get("event") == event]
        if len(found) >= count:
            return found
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited {proc.returncode}: {proc.log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {event!r} in {proc.log_path} within {timeout} s")
        time.sleep(0.02)


def engine_counters(proc: subprocess.Popen, timeout: float = 30) -> dict:
    """An engine process's counters now (transactions committed, commands processed): it logs
    them as `engine_stats` when sent SIGUSR2."""
    asked = sum(1 for line in log_lines(proc) if line.get("event") == "engine_stats")
    proc.send_signal(signal.SIGUSR2)
    return wait_log(proc, "engine_stats", timeout, count=asked + 1)[-1]


def worker_stats(proc: subprocess.Popen, timeout: float = 30) -> dict:
    """A bench worker process's workflow worker stats now (`bench.workflow_worker_main` logs
    them as `worker_stats` when sent SIGUSR2)."""
    asked = sum(1 for line in log_lines(proc) if line.get("event") == "worker_stats")
    proc.send_signal(signal.SIGUSR2)
    return wait_log(proc, "worker_stats", timeout, count=asked + 1)[-1]


def log_time_ms(line: dict) -> float:
    """Epoch ms of a structlog JSON line's ISO timestamp."""
    return datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00")).timestamp() * 1000


def peak_rss_mb(proc: subprocess.Popen) -> float | None:
    """VmHWM (peak resident set) of a live process, in MiB."""
    try:
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def percentiles(values: list[float]) -> dict:
    """Nearest-rank p50/p99 and max, in ms (values in ms)."""
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None}
    s = sorted(values)

    def rank(p: float) -> float:
        return s[min(len(s) - 1, max(0, int(-(-p * len(s) // 100)) - 1))]
    return {"n": len(s), "p50": round(rank(50), 1), "p99": round(rank(99), 1), "max": round(s[-1], 1)}


def peek(data: bytes) -> tuple[str, bytes]:
    """(record type, intent) of an Avro-encoded Record, without decoding the rest.

    The record starts with the record_type enum index and the value_type and intent
    strings, each a zigzag varint length (one byte: our strings are short) then bytes.
    """
    vl = data[1] >> 1
    il = data[2 + vl] >> 1
    return RECORD_TYPES[data[0] >> 1], data[3 + vl:3 + vl + il]


class EventTap:
    """Reads the events topic (read_committed) from a position, keeping raw values and counts."""

    def __init__(self, bench: Bench, partitions: int, from_end: bool = False) -> None:
        self.topic = bench.topics.events
        # A fetch is answered as soon as a record is readable whatever its maximum wait
        # (streamproc.kafka.config): a short wait would only cost the measured broker CPU.
        self._consumer = Consumer({
            "bootstrap.servers": bench.bootstrap, "group.id": f"{bench.namespace}.tap.{uuid.uuid4().hex}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "queued.max.messages.kbytes": 262144,
        })
        tps = []
        for p in range(partitions):
            start = OFFSET_BEGINNING
            if from_end:
                _, start = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), 10)
            tps.append(TopicPartition(self.topic, p, start))
        self._consumer.assign(tps)
        self.raw: list[bytes] = []
        self.counts: dict[tuple[str, bytes], int] = {}
        #: Commit markers passed over (a read_committed reader skips their offsets): the
        #: number of transactions that wrote to the events topic, per partition summed.
        self.markers = 0
        self._last_offset: dict[int, int] = {}

    def poll(self, timeout: float = 0.05) -> int:
        n = 0
        for msg in self._consumer.consume(10_000, timeout):
            if msg.error() is not None:
                continue
            last = self._last_offset.get(msg.partition())
            if last is not None:
                self.markers += msg.offset() - last - 1
            self._last_offset[msg.partition()] = msg.offset()
            value = msg.value()
            self.raw.append(value)
            kind = peek(value)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            n += 1
        return n

    def count(self, intent: str, record_type: str = "EVENT") -> int:
        return self.counts.get((record_type, intent.encode()), 0)

    def rejections(self) -> int:
        return sum(n for (rt, _), n in self.counts.items() if rt == "COMMAND_REJECTION")

    def wait(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached within {timeout} s; counts {self.summary()}")
            self.poll()

    def decode(self, *intents: str) -> list:
        """Decode the kept records with one of `intents` (events and rejections alike)."""
        wanted = {i.encode() for i in intents}
        return [codec.decode(v, codec.AVRO_HEADERS) for v in self.raw if peek(v)[1] in wanted]

    def summary(self) -> dict[str, int]:
        return {f"{rt}:{intent.decode()}": n for (rt, intent), n in sorted(self.counts.items())}

    def forget(self) -> None:
        self.raw.clear()
        self.counts.clear()
        self.markers = 0

    def close(self) -> None:
        self._consumer.close()


def loadavg() -> float:
    return round(os.getloadavg()[0], 2)


def group_assignment(bench: Bench, group: str) -> tuple[str, dict[str, list[int]]]:
    """(state, {client id: partitions}) of a consumer group, as the broker describes it."""
    admin = AdminClient({"bootstrap.servers": bench.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(10)
    members = {m.client_id + "/" + m.member_id[-6:]: sorted(tp.partition for tp in m.assignment.topic_partitions)
               for m in desc.members}
    return desc.state.name, members


def wait_group_stable(bench: Bench, group: str, members: int, partitions: int, timeout: float = 60) -> dict:
    """Wait until the group is STABLE with `members` members owning all `partitions` partitions."""
    deadline = time.monotonic() + timeout
    while True:
        state, assignment = group_assignment(bench, group)
        owned = sorted(p for ps in assignment.values() for p in ps)
        if state == "STABLE" and len(assignment) == members and owned == list(range(partitions)):
            return assignment
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {group} is {state} with {assignment} after {timeout} s")
        time.sleep(0.2)


class CpuMeter:
    """CPU seconds used by named groups of processes between `start()` and `read()`.

    `pids` maps a role to process ids; role "client" is this process (all its threads)."""

    def __init__(self, pids: dict[str, list[int | None]]) -> None:
        self.pids = pids
        self._before = self._now()

    def _now(self) -> dict[str, float]:
        out = {role: sum(pid_cpu_seconds(pid) for pid in pids) for role, pids in self.pids.items()}
        out["client"] = time.process_time()
        return out

    def start(self) -> None:
        self._before = self._now()

    def read(self) -> dict[str, float]:
        return {role: round(v - self._before[role], 2) for role, v in self._now().items()}


def cpu_seconds(proc: subprocess.Popen) -> float:
    """User + system CPU time a live process has used so far."""
    return pid_cpu_seconds(proc.pid)


def broker_pid(bootstrap: str) -> int | None:
    """The pid of the local broker the first of `bootstrap`'s servers names (None if not local)."""
    port = bootstrap.split(",")[0].rsplit(":", 1)[-1]
    return listener_pid(int(port)) if port.isdigit() else None


def listener_pid(port: int) -> int | None:
    """The pid of the process listening on a local TCP port (the broker), from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue
    return None


def pid_cpu_seconds(pid: int | None) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
