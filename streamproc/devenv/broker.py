"""A single-node Apache Kafka broker for development and tests: no Docker, no download site.

The broker runs KRaft in combined mode (broker and controller in one JVM) on 127.0.0.1, from the
Kafka jars on Maven Central, which ``mvn dependency:copy-dependencies`` resolves once with the pom
shipped next to this module (``broker-pom.xml``) into a cache directory.  Needs Java 17+ (Kafka 4.x)
and Maven; the first ``install()`` needs Maven Central (or the user's Maven mirror), later starts
work offline.

    broker = LocalBroker(port=29092, state_dir="/some/dir")
    bootstrap = broker.start()          # "127.0.0.1:29092", once the broker answers metadata
    ...
    broker.kill()                       # crash (SIGKILL), data kept: for recovery tests
    broker.start()                      # recovers its logs and transactions
    broker.stop()                       # controlled shutdown
    broker.reset()                      # stop and delete all data

or from a shell (``python -m streamproc.devenv.broker --help``):

    export STREAMPROC_BOOTSTRAP=$(python -m streamproc.devenv.broker start --port 29092)

State directory layout: ``data/`` (log.dirs and KRaft metadata log), ``server.properties``,
``log4j2.properties`` (``log4j.properties`` for Kafka 3.x), ``kafka.pid``, ``kafka.log`` (the
broker's own log, rolled at 10 MB, 3 old files kept) and ``kafka.out`` (JVM stdout/stderr and the
storage-format output of the last start).

Environment (constructor arguments win over these):
    STREAMPROC_BROKER_DIR              state directory   (default ~/.local/state/streamproc/kafka)
    STREAMPROC_BROKER_PORT             client port       (default 19092)
    STREAMPROC_BROKER_CONTROLLER_PORT  controller port   (default client port + 1)
    STREAMPROC_KAFKA_VERSION           Kafka version     (default 4.1.1; 3.9.x resolves with reload4j)
    STREAMPROC_BROKER_HEAP             JVM heap options  (default "-Xms256m -Xmx1g")
Jars go to ``~/.cache/streamproc/kafka-<version>/lib`` (``$XDG_CACHE_HOME`` is honoured, as is
``$XDG_STATE_HOME`` for the state directory).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "BrokerError",
    "LocalBroker",
    "broker_reachable",
    "ensure_broker",
    "DEFAULT_PORT",
    "DEFAULT_KAFKA_VERSION",
]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 19092
DEFAULT_KAFKA_VERSION = "4.1.1"
DEFAULT_HEAP = "-Xms256m -Xmx1g"
SCALA_BINARY = "2.13"
NODE_ID = 1
POM_NAME = "broker-pom.xml"
INSTALL_MARKER = ".complete"
MVN_TIMEOUT = 30 * 60

ENV_DIR = "STREAMPROC_BROKER_DIR"
ENV_PORT = "STREAMPROC_BROKER_PORT"
ENV_CONTROLLER_PORT = "STREAMPROC_BROKER_CONTROLLER_PORT"
ENV_VERSION = "STREAMPROC_KAFKA_VERSION"
ENV_HEAP = "STREAMPROC_BROKER_HEAP"

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class BrokerError(RuntimeError):
    """Something went wrong managing the local broker; ``log_tail`` holds the broker's last log lines."""

    def __init__(self, message: str, log_tail: str = "", label: str = "last broker log lines") -> None:
        self.message = message
        self.log_tail = log_tail
        text = message
        if log_tail.strip():
            text += f"\n--- {label} ---\n" + log_tail.rstrip()
        super().__init__(text)


# --------------------------------------------------------------------------- defaults


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def default_state_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    return _xdg("XDG_STATE_HOME", ".local/state") / "streamproc" / "kafka"


def default_lib_dir(version: str) -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache") / "streamproc" / f"kafka-{version}" / "lib"


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise BrokerError(f"{name}={value!r} is not a port number") from None


def _major(version: str) -> int:
    m = re.match(r"(\d+)", version)
    if not m:
        raise BrokerError(f"cannot read a major version from Kafka version {version!r}")
    return int(m.group(1))


# --------------------------------------------------------------------------- small helpers


def _port_in_use(port: int) -> bool:
    """True if something listens on 127.0.0.1:port (a bind with SO_REUSEADDR fails only then)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def _port_accepts(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _admin(bootstrap: str, timeout: float):
    from confluent_kafka.admin import AdminClient

    ms = max(1000, int(timeout * 1000))
    return AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "socket.timeout.ms": ms,
            "socket.connection.setup.timeout.ms": ms,
            "log_level": 0,  # connection-refused chatter is expected while probing
        }
    )


def _metadata_ok(admin, timeout: float) -> bool:
    from confluent_kafka import KafkaException

    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return bool(md.brokers)


def broker_reachable(bootstrap: str, timeout: float = 5.0) -> bool:
    """True if a Kafka broker at ``bootstrap`` answers a metadata request within ``timeout`` s."""
    return _metadata_ok(_admin(bootstrap, timeout), timeout)


def _tail_file(path: Path, n: int, since: int = 0) -> list[str]:
    """The last n lines of a file, looking no further back than byte offset ``since``."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if since > size:  # rolled over since
                since = 0
            chunk = max(4096, n * 256)
            while True:
                start = max(since, size - chunk)
                f.seek(start)
                data = f.read(size - start)
                lines = data.splitlines()
                if start == since or len(lines) > n:
                    break
                chunk *= 2
    except FileNotFoundError:
        return []
    return [line.decode("utf-8", "replace") for line in lines[-n:]] if n > 0 else []


def _prop_escape(value: str) -> str:
    """Escape a value for a java.util.Properties file (read as ISO-8859-1 by the JVM)."""
    out = []
    for ch in value.replace("\\", "\\\\"):
        if ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) > 0x7E or ord(ch) < 0x20:
            data = ch.encode("utf-16-be")
            out.extend("\\u%04X" % int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
        else:
            out.append(ch)
    return "".join(out)


def _prop_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _random_cluster_id() -> str:
    """A Kafka Uuid as the storage tool wants it: 16 random bytes, base64url, no padding."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):  # Kafka's Uuid.randomUuid avoids these too
            return text


def _proc_cmdline(pid: int) -> list[str] | None:
    """The process' argv, or None if it cannot be read (then callers assume it matches)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return []  # Linux: the process is gone
    except OSError:
        return None
    try:
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.split()


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] in "ZX"
    except (OSError, ValueError, IndexError):
        return False


def _rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
        return int(out.stdout.strip()) * 1024
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock between processes (e.g. test workers starting the same broker)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _pom_text() -> str:
    try:
        from importlib import resources

        if __package__:
            return resources.files(__package__).joinpath(POM_NAME).read_text(encoding="utf-8")
    except (ImportError, FileNotFoundError, ModuleNotFoundError):
        pass
    return Path(__file__).with_name(POM_NAME).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the broker


class LocalBroker:
    """One single-node KRaft broker on 127.0.0.1, owned by a state directory.

    All methods are safe to call from several processes at once: start/stop/kill/reset take a
    file lock in the state directory, and install() one next to the jar cache.
    """

    def __init__(
        self,
        port: int | None = None,
        controller_port: int | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        kafka_version: str | None = None,
        lib_dir: str | os.PathLike[str] | None = None,
        heap: str | None = None,
        extra_properties: Mapping[str, Any] | None = None,
    ) -> None:
        self.port = int(port if port is not None else _env_int(ENV_PORT) or DEFAULT_PORT)
        if controller_port is None:
            controller_port = _env_int(ENV_CONTROLLER_PORT) or self.port + 1
        self.controller_port = int(controller_port)
        if self.port == self.controller_port:
            raise BrokerError(f"client and controller port are both {self.port}")
        self.state_dir = (Path(state_dir).expanduser() if state_dir is not None else default_state_dir()).resolve()
        self.kafka_version = kafka_version or os.environ.get(ENV_VERSION) or DEFAULT_KAFKA_VERSION
        self.lib_dir = Path(lib_dir).expanduser() if lib_dir is not None else default_lib_dir(self.kafka_version)
        self.heap = heap or os.environ.get(ENV_HEAP) or DEFAULT_HEAP
        self.extra_properties = dict(extra_properties or {})
        #: True once start() of this object launched the JVM (False if it found one running).
        self.launched = False
        #: seconds from launching the JVM to the first metadata answer, set by start()
        self.last_start_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._java_major: int | None = None
        self._log_offset = 0

    # ---- paths

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.state_dir / "data"

    @property
    def config_file(self) -> Path:
        return self.state_dir / "server.properties"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "kafka.pid"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "kafka.log"

    @property
    def out_file(self) -> Path:
        return self.state_dir / "kafka.out"

    @property
    def _log_config(self) -> Path:
        name = "log4j2.properties" if _major(self.kafka_version) >= 4 else "log4j.properties"
        return self.state_dir / name

    def __del__(self) -> None:
        # A broker left running on purpose (e.g. by the CLI) is not a leak: drop the Popen
        # without its "subprocess is still running" ResourceWarning.
        proc, self._proc = getattr(self, "_proc", None), None
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore", ResourceWarning)
                del proc

    def __repr__(self) -> str:
        return f"LocalBroker({self.bootstrap}, kafka {self.kafka_version}, {self.state_dir})"

    # ---- install

    def is_installed(self) -> bool:
        return (self.lib_dir / INSTALL_MARKER).is_file()

    def install(self) -> Path:
        """Resolve the broker jars into ``lib_dir`` with Maven (once; later calls return at once)."""
        if self.is_installed():
            return self.lib_dir
        self._java()
        mvn = shutil.which("mvn")
        if not mvn:
            raise BrokerError(
                "mvn not found on PATH: Maven is needed once to fetch the Kafka jars from Maven Central "
                "(e.g. apt-get install maven)"
            )
        with _file_lock(self.lib_dir.parent / ".install.lock"):
            if self.is_installed():
                return self.lib_dir
            logging_backend = "log4j2" if _major(self.kafka_version) >= 4 else "reload4j"
            log.info("resolving org.apache.kafka:kafka_%s:%s with Maven into %s",
                     SCALA_BINARY, self.kafka_version, self.lib_dir)
            t0 = time.monotonic()
            work = Path(tempfile.mkdtemp(prefix=".install-", dir=self.lib_dir.parent))
            try:
                pom = work / "pom.xml"
                pom.write_text(_pom_text(), encoding="utf-8")
                jars = work / "lib"
                cmd = [
                    mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(pom),
                    f"-Dkafka.version={self.kafka_version}", f"-Dkafka.logging={logging_backend}",
                    "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={jars}",
                ]
                try:
                    res = subprocess.run(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True, timeout=MVN_TIMEOUT)
                except subprocess.TimeoutExpired:
                    raise BrokerError(f"mvn did not finish within {MVN_TIMEOUT} s") from None
                output = "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", res.stdout).splitlines()[-40:])
                if res.returncode != 0:
                    raise BrokerError(
                        f"mvn could not resolve org.apache.kafka:kafka_{SCALA_BINARY}:{self.kafka_version} "
                        f"(exit {res.returncode}); is Maven Central reachable and the version right?",
                        output, "mvn output",
                    )
                core = jars / self._core_jar_name()
                if not core.is_file():
                    raise BrokerError(f"mvn finished but {core.name} is not among the resolved jars",
                                      output, "mvn output")
                count = len(list(jars.glob("*.jar")))
                (jars / INSTALL_MARKER).write_text(f"kafka {self.kafka_version}\n{count} jars\n")
                if self.lib_dir.exists():
                    shutil.rmtree(self.lib_dir)
                os.replace(jars, self.lib_dir)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            size = sum(p.stat().st_size for p in self.lib_dir.glob("*.jar"))
            log.info("installed %d jars (%.0f MB) in %.1f s", count, size / 1e6, time.monotonic() - t0)
        return self.lib_dir

    def _core_jar_name(self) -> str:
        return f"kafka_{SCALA_BINARY}-{self.kafka_version}.jar"

    def _main_classes(self) -> tuple[str, str]:
        """(broker main, storage tool) as found in the jars; fails loudly if one is missing."""
        wanted = {"kafka.Kafka": ["kafka.Kafka"],
                  "StorageTool": ["kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"]}
        core = self.lib_dir / self._core_jar_name()
        jars = [core] + sorted(p for p in self.lib_dir.glob("kafka*.jar") if p != core)
        found: dict[str, str] = {}
        for jar in jars:
            try:
                with zipfile.ZipFile(jar) as z:
                    names = set(z.namelist())
            except (OSError, zipfile.BadZipFile) as e:
                raise BrokerError(f"cannot read {jar}: {e}; delete {self.lib_dir} and install again") from None
            for role, candidates in wanted.items():
                if role not in found:
                    for cls in candidates:
                        if cls.replace(".", "/") + ".class" in names:
                            found[role] = cls
                            break
            if len(found) == len(wanted):
                return found["kafka.Kafka"], found["StorageTool"]
        missing = [r for r in wanted if r not in found]
        raise BrokerError(f"no {' / '.join(missing)} class in the jars of {self.lib_dir}")

    # ---- java

    def _java(self) -> str:
        home = os.environ.get("JAVA_HOME")
        if home and (Path(home) / "bin" / "java").is_file():
            return str(Path(home) / "bin" / "java")
        java = shutil.which("java")
        if not java:
            raise BrokerError("java not found (PATH or JAVA_HOME): the broker needs a Java 17+ runtime "
                              "(e.g. apt-get install openjdk-17-jre-headless)")
        return java

    def _check_java(self, java: str) -> None:
        if self._java_major is None:
            try:
                res = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.SubprocessError) as e:
                raise BrokerError(f"cannot run {java} -version: {e}") from None
            m = re.search(r'version "(\d+)(?:\.(\d+))?', res.stderr + res.stdout)
            if not m:
                return  # unknown format: let the JVM speak for itself
            major = int(m.group(1))
            self._java_major = int(m.group(2) or 0) if major == 1 else major
        need = 17 if _major(self.kafka_version) >= 4 else 8
        if self._java_major < need:
            raise BrokerError(f"Kafka {self.kafka_version} needs Java {need}+, but {java} is Java {self._java_major}")

    def _java_command(self, java: str, main: str, *args: str, heap: str | None = None,
                      log_config: Path | None = None) -> list[str]:
        log_config = log_config or self._log_config
        if _major(self.kafka_version) >= 4:
            logging_opt = f"-Dlog4j2.configurationFile={log_config}"
        else:
            logging_opt = f"-Dlog4j.configuration={log_config.as_uri()}"
        return [
            java,
            *shlex.split(heap if heap is not None else self.heap),
            "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-XX:+ExplicitGCInvokesConcurrent", "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            logging_opt,
            f"-Dkafka.logs.dir={self.state_dir}",
            "-cp", str(self.lib_dir / "*"),
            main, *args,
        ]

    # ---- configuration

    def server_properties(self) -> dict[str, str]:
        """The broker configuration this object writes (``extra_properties`` applied last)."""
        props: dict[str, Any] = {
            # one JVM is broker and controller; static quorum (works on 3.9.x and 4.x)
            "process.roles": "broker,controller",
            "node.id": NODE_ID,
            "controller.quorum.voters": f"{NODE_ID}@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # one node: every replication factor and min ISR is 1, so acks=all and
            # transactions work (the engine produces with idempotence and transactions)
            "num.partitions": 1,
            "default.replication.factor": 1,
            "min.insync.replicas": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            # the first consumer of a group gets its partitions at once
            "group.initial.rebalance.delay.ms": 0,
            # the engine creates every topic with its partitions and configs; a topic created
            # by accident (e.g. by a metadata request naming it) would have the wrong ones
            "auto.create.topics.enable": False,
            # compaction acts within seconds when a topic asks for it (segment.ms, min.cleanable...)
            "log.cleaner.backoff.ms": 1000,
            "log.retention.check.interval.ms": 10000,
            # after a crash (kill()) the restarted broker cannot register until the controller
            # expires its previous session: 3 s instead of 9 s makes a crash restart take ~4.5 s
            # instead of ~12 s.  The cost: a JVM stalled for > 3 s gets fenced until its next
            # heartbeat (clients retry through it).
            "broker.session.timeout.ms": 3000,
            "broker.heartbeat.interval.ms": 500,
            # a 2-core development machine
            "num.network.threads": 2,
            "num.io.threads": 4,
            "background.threads": 4,
            "num.recovery.threads.per.data.dir": 2,
            # log.flush.*, transaction.max.timeout.ms (15 min): Kafka defaults
        }
        props.update(self.extra_properties)
        return {k: _prop_value(v) for k, v in props.items()}

    def _write_configs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [f"# written by streamproc.devenv.broker on each start; edits are overwritten",
                 f"# (pass extra_properties / --set key=value instead)"]
        lines += [f"{k}={_prop_escape(v)}" for k, v in self.server_properties().items()]
        self.config_file.write_text("\n".join(lines) + "\n", encoding="ascii")
        log_path = _prop_escape(str(self.log_file))
        if _major(self.kafka_version) >= 4:
            text = f"""\
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = {log_path}
appender.file.filePattern = {log_path}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 10MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""
        else:
            text = f"""\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File={log_path}
log4j.appender.file.MaxFileSize=10MB
log4j.appender.file.MaxBackupIndex=3
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.state.change.logger=WARN
"""
        self._log_config.write_text(text, encoding="ascii")

    def _format_storage(self, java: str, storage_tool: str) -> None:
        if (self.data_dir / "meta.properties").is_file():
            return
        cluster_id = _random_cluster_id()
        log.info("formatting %s (cluster id %s)", self.data_dir, cluster_id)
        # the tool logs to stdout (kafka.out), warnings only: kafka.log stays the broker's
        tool_log = self.state_dir / "tools-log4j.properties"
        if _major(self.kafka_version) >= 4:
            tool_log.write_text("status = warn\nappender.out.type = Console\nappender.out.name = OUT\n"
                                "appender.out.layout.type = PatternLayout\n"
                                "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
                                "rootLogger.level = WARN\nrootLogger.appenderRef.out.ref = OUT\n")
        else:
            tool_log.write_text("log4j.rootLogger=WARN, out\nlog4j.appender.out=org.apache.log4j.ConsoleAppender\n"
                                "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
                                "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
        cmd = self._java_command(java, storage_tool, "format", "-t", cluster_id, "-c", str(self.config_file),
                                 heap="-Xmx256m", log_config=tool_log)
        with open(self.out_file, "ab") as out:
            res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=self.state_dir, timeout=120)
        if res.returncode != 0:
            # leave no half-formatted directory behind: the next start formats afresh
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise BrokerError(f"formatting the storage in {self.data_dir} failed (exit {res.returncode})",
                              self.log_tail(30))

    # ---- process bookkeeping

    def _read_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _alive(self, pid: int) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            return self._proc.poll() is None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not _is_zombie(pid)

    def _pid(self) -> int | None:
        """The pid of this state directory's running broker, or None (a stale pid file is removed)."""
        pid = self._read_pid()
        if pid is None:
            return None
        if self._alive(pid):
            argv = _proc_cmdline(pid)
            if argv is None or ("kafka.Kafka" in argv and str(self.config_file) in argv):
                return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def _running_port(self) -> int | None:
        """The client port in the config the running broker was started with."""
        try:
            text = self.config_file.read_text(encoding="ascii")
        except OSError:
            return None
        m = re.search(r"^advertised\.listeners=PLAINTEXT://[^:\s]+:(\d+)", text, re.M)
        return int(m.group(1)) if m else None

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self._alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _signal(self, pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def _lock(self):
        return _file_lock(self.state_dir / ".lock")

    # ---- lifecycle

    def is_running(self) -> bool:
        """True if this state directory's broker process is alive (it may still be starting)."""
        return self._pid() is not None

    def start(self, timeout: float = 90.0) -> str:
        """Start the broker (installing the jars and formatting the storage the first time) and
        return its bootstrap address once it answers metadata requests.

        If this state directory's broker already runs, wait for it to answer (at once if it does)
        and return its address.  ``timeout`` bounds that wait, not the one-time jar download.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            pid = self._pid()
            if pid is not None:
                running_port = self._running_port()
                if running_port is not None and running_port != self.port:
                    raise BrokerError(
                        f"the broker of {self.state_dir} already runs on port {running_port} (pid {pid}), "
                        f"not {self.port}: stop it first or use another state directory")
                self._wait_ready(pid, timeout)
                return self.bootstrap
            self._check_ports()
            java = self._java()
            self._check_java(java)
            self.install()
            main, storage_tool = self._main_classes()
            self._write_configs()
            self.out_file.write_bytes(b"")
            self._format_storage(java, storage_tool)

            cmd = self._java_command(java, main, str(self.config_file))
            try:
                self._log_offset = self.log_file.stat().st_size
            except FileNotFoundError:
                self._log_offset = 0
            t0 = time.monotonic()
            with open(self.out_file, "ab") as out:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                        cwd=self.state_dir, start_new_session=True, close_fds=True)
            self._proc = proc
            self.pid_file.write_text(f"{proc.pid}\n")
            try:
                self._wait_ready(proc.pid, timeout)
            except BaseException:
                self._signal(proc.pid, signal.SIGKILL)
                self._wait_exit(proc.pid, 10)
                self.pid_file.unlink(missing_ok=True)
                raise
            self.launched = True
            self.last_start_seconds = time.monotonic() - t0
            log.info("kafka %s up on %s in %.1f s (pid %d, log %s)", self.kafka_version, self.bootstrap,
                     self.last_start_seconds, proc.pid, self.log_file)
            return self.bootstrap

    def _check_ports(self) -> None:
        for port, what in ((self.port, "client"), (self.controller_port, "controller")):
            if not _port_in_use(port):
                continue
            msg = (f"{what} port {HOST}:{port} is already in use by another process (not the broker of "
                   f"{self.state_dir}); choose other ports (port=/controller_port=, --port, "
                   f"{ENV_PORT}) or stop that process")
            if what == "client" and broker_reachable(f"{HOST}:{port}", timeout=1):
                msg += f"; a Kafka broker answers there: to use it, set STREAMPROC_BOOTSTRAP={HOST}:{port}"
            raise BrokerError(msg)

    def _wait_ready(self, pid: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        admin = None
        try:
            while True:
                if not self._alive(pid):
                    code = self._proc.returncode if self._proc is not None and self._proc.pid == pid else None
                    how = f" with exit code {code}" if code is not None else ""
                    raise BrokerError(f"the broker process (pid {pid}) exited{how} before answering on "
                                      f"{self.bootstrap}", self._launch_log_tail(pid, 40))
                remaining = deadline - time.monotonic()
                if _port_accepts(self.port):
                    if admin is None:
                        admin = _admin(self.bootstrap, 2.0)
                    if _metadata_ok(admin, max(0.5, min(2.0, remaining))):
                        return
                if time.monotonic() >= deadline:
                    raise BrokerError(f"the broker (pid {pid}) did not answer metadata requests on "
                                      f"{self.bootstrap} within {timeout:.0f} s", self._launch_log_tail(pid, 40))
                time.sleep(0.1)
        finally:
            del admin

    def stop(self, timeout: float = 30.0) -> bool:
        """Controlled shutdown (SIGTERM), SIGKILL after ``timeout`` s.  False if nothing ran."""
        if not self.state_dir.is_dir():
            return False
        with self._lock():
            return self._stop(timeout)

    def _stop(self, timeout: float) -> bool:
        pid = self._pid()
        if pid is None:
            return False
        t0 = time.monotonic()
        self._signal(pid, signal.SIGTERM)
        if not self._wait_exit(pid, timeout):
            log.warning("broker pid %d did not stop within %.0f s of SIGTERM: SIGKILL", pid, timeout)
            self._signal(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10):
                raise BrokerError(f"broker pid {pid} survived SIGKILL", self.log_tail(20))
        self.pid_file.unlink(missing_ok=True)
        log.info("broker pid %d stopped in %.1f s", pid, time.monotonic() - t0)
        return True

    def kill(self) -> bool:
        """Crash the broker (SIGKILL), keeping its data: the next start() recovers.  False if nothing ran."""
        if not self.state_dir.is_dir():
            return False
        with self._lock():
            pid = self._pid()
            if pid is None:
                return False
            self._signal(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10):
                raise BrokerError(f"broker pid {pid} survived SIGKILL")
            self.pid_file.unlink(missing_ok=True)
            log.info("broker pid %d killed", pid)
            return True

    def reset(self, timeout: float = 30.0) -> None:
        """Stop the broker and delete its data and logs: the next start() formats a new cluster."""
        if not self.state_dir.is_dir():
            return
        with self._lock():
            self._stop(timeout)
            shutil.rmtree(self.data_dir, ignore_errors=True)
            for p in [self.out_file, *self.state_dir.glob(self.log_file.name + "*")]:
                p.unlink(missing_ok=True)
            log.info("deleted the data of %s", self.state_dir)

    # ---- inspection

    def status(self) -> dict[str, Any]:
        """running, pid, bootstrap, rss (bytes), plus version, state_dir and log file."""
        pid = self._pid()
        port = (self._running_port() or self.port) if pid is not None else self.port
        return {
            "running": pid is not None,
            "pid": pid,
            "bootstrap": f"{HOST}:{port}",
            "rss": _rss_bytes(pid) if pid is not None else None,
            "kafka_version": self.kafka_version,
            "state_dir": str(self.state_dir),
            "log": str(self.log_file),
            "installed": self.is_installed(),
        }

    def _launch_log_tail(self, pid: int, n: int) -> str:
        """log_tail, limited to what the JVM this object launched wrote (not earlier runs)."""
        ours = self._proc is not None and self._proc.pid == pid
        return self.log_tail(n, since=self._log_offset if ours else 0)

    def log_tail(self, n: int = 50, *, since: int = 0) -> str:
        """The last ``n`` lines of the broker log, then of the JVM's own output if it has any."""
        text = "\n".join(_tail_file(self.log_file, n, since))
        out = _tail_file(self.out_file, n)
        if any(line.strip() for line in out):
            text += ("\n" if text else "") + f"--- {self.out_file.name} ---\n" + "\n".join(out)
        return text


# --------------------------------------------------------------------------- helpers for tests / CLI


def _split_hostport(bootstrap: str) -> tuple[str, int] | None:
    first = bootstrap.split(",")[0].strip()
    first = re.sub(r"^[A-Za-z_]+://", "", first)
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host, int(port)


def ensure_broker(bootstrap_env: str = "STREAMPROC_BOOTSTRAP", *, timeout: float = 90.0,
                  **broker_kwargs: Any) -> tuple[str, LocalBroker | None]:
    """A broker to talk to: ``(bootstrap, None)`` if ``$bootstrap_env`` names one that answers,
    else ``(bootstrap, broker)`` for a LocalBroker started (or found running) here.

    If the variable names a loopback address that does not answer, the local broker is started on
    that port; a remote address that does not answer is an error (no silent substitute).
    ``broker.launched`` tells whether this call launched the JVM (and so should stop it).
    """
    named = os.environ.get(bootstrap_env, "").strip() if bootstrap_env else ""
    if named:
        if broker_reachable(named, timeout=5.0):
            return named, None
        hp = _split_hostport(named)
        if hp is None or hp[0] not in _LOOPBACK or "," in named:
            raise BrokerError(f"{bootstrap_env}={named} does not answer as a Kafka broker")
        broker_kwargs.setdefault("port", hp[1])
    broker = LocalBroker(**broker_kwargs)
    return broker.start(timeout=timeout), broker


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamproc.devenv.broker",
        description="Manage a single-node Apache Kafka broker (KRaft) on 127.0.0.1 for development.",
        epilog="start prints the bootstrap address on stdout; status exits 0 if running, 3 if not.",
    )
    parser.add_argument("command", choices=["start", "stop", "status", "kill", "reset", "install", "log"])
    parser.add_argument("-p", "--port", type=int, help=f"client port (${ENV_PORT}, default {DEFAULT_PORT})")
    parser.add_argument("--controller-port", type=int, help=f"controller port (${ENV_CONTROLLER_PORT}, default port+1)")
    parser.add_argument("-d", "--dir", dest="state_dir", help=f"state directory (${ENV_DIR})")
    parser.add_argument("--kafka-version", help=f"Kafka version (${ENV_VERSION}, default {DEFAULT_KAFKA_VERSION})")
    parser.add_argument("--lib-dir", help="jar cache directory")
    parser.add_argument("--heap", help=f"JVM heap options (${ENV_HEAP}, default {DEFAULT_HEAP!r})")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra server property (repeatable)")
    parser.add_argument("--timeout", type=float, help="seconds to wait (start: 90, stop: 30)")
    parser.add_argument("-n", "--lines", type=int, default=100, help="log: how many lines")
    parser.add_argument("--json", action="store_true", help="status: print JSON")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="[broker] %(message)s", stream=sys.stderr)
    extra = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            parser.error(f"--set wants KEY=VALUE, got {item!r}")
        extra[key.strip()] = value.strip()
    try:
        broker = LocalBroker(port=args.port, controller_port=args.controller_port, state_dir=args.state_dir,
                             kafka_version=args.kafka_version, lib_dir=args.lib_dir, heap=args.heap,
                             extra_properties=extra)
        cmd = args.command
        if cmd == "start":
            print(broker.start(timeout=args.timeout or 90.0), flush=True)
            if not broker.launched:
                log.info("already running (pid %s)", broker.status()["pid"])
        elif cmd == "stop":
            if not broker.stop(timeout=args.timeout or 30.0):
                log.info("not running")
        elif cmd == "kill":
            if not broker.kill():
                log.info("not running")
        elif cmd == "reset":
            broker.reset(timeout=args.timeout or 30.0)
        elif cmd == "install":
            print(broker.install(), flush=True)
        elif cmd == "log":
            print(broker.log_tail(args.lines), flush=True)
        elif cmd == "status":
            st = broker.status()
            if args.json:
                print(json.dumps(st), flush=True)
            elif st["running"]:
                print(f"running  pid {st['pid']}  {st['bootstrap']}  rss {_human_bytes(st['rss'])}  "
                      f"kafka {st['kafka_version']}  {st['state_dir']}", flush=True)
            else:
                print(f"not running  ({st['bootstrap']}, {st['state_dir']})", flush=True)
            return 0 if st["running"] else 3
    except BrokerError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
