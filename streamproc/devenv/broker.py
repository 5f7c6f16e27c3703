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

or from a shell (``streamproc broker --help``):

    export STREAMPROC_BOOTSTRAP=$(streamproc broker start --port 29092)

State directory layout: ``data/`` (log.dirs and KRaft metadata log), ``server.properties``,
``log4j2.properties`` (``log4j.properties`` for Kafka 3.x), ``kafka.pid``, ``kafka.log`` (the
broker's own log, rolled at 10 MB, 3 old files kept) and ``kafka.out`` (JVM stdout/stderr and the
storage-format output of the last start).

Environment (constructor arguments win over these):
    STREAMPROC_BROKER_DIR              state directory   (default ~/.local/state/streamproc/kafka)
    STREAMPROC_BROKER_PORT             client port       (default 19092)
    STREAMPROC_BROKER_CONTROLLER_PORT  controller port   (default client port + 1)
    STREAMPROC_KAFKA_VERSION           Kafka version     (default 4.1.1; 3.9.x resolves with reload4j)
    STREAMPROC_BROKER_HEAP             JVM heap options  (default "-Xms1g -Xmx1g")
    STREAMPROC_BROKER_JVM_OPTS         more JVM options, after the project's own (default none)
Jars go to ``~/.cache/streamproc/kafka-<version>/lib`` (``$XDG_CACHE_HOME`` is honoured, as is
``$XDG_STATE_HOME`` for the state directory).

This module is the lifecycle; the parts live next to it: ``broker_settings`` (defaults and
environment), ``broker_install`` (the jars), ``broker_jvm`` (java and its command line),
``broker_config`` (server.properties, log4j), ``broker_process`` (pids, signals, locks),
``broker_probe`` (ports and metadata requests), ``broker_errors`` and ``broker_choice``
(``ensure_broker``: the broker the environment names, or this one); its commands are
``streamproc broker ...`` (``streamproc/cli/broker_commands.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from streamproc.devenv.broker_config import (advertised_port, broker_log_config, log_config_name, random_cluster_id,
                                             server_properties, server_properties_file, storage_tool_log_config)
from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_install import find_main_classes, install_jars, jars_installed
from streamproc.devenv.broker_jvm import check_java, find_java, jvm_command
from streamproc.devenv.broker_security import SaslSslListener
from streamproc.devenv.broker_probe import broker_reachable, check_ports_free, wait_until_answering
from streamproc.devenv.broker_process import (file_lock, is_alive, read_pid, rss_bytes, runs_broker_with, send_signal,
                                              tail_lines, wait_for_exit)
from streamproc.devenv.broker_settings import (DEFAULT_HEAP, DEFAULT_KAFKA_VERSION, DEFAULT_PORT, ENV_CONTROLLER_PORT,
                                               ENV_HEAP, ENV_PORT, ENV_VERSION, HOST, default_lib_dir,
                                               default_state_dir, port_from_env)

__all__ = ["BrokerError", "LocalBroker", "broker_reachable", "DEFAULT_PORT", "DEFAULT_KAFKA_VERSION"]

# One logger for everything the local broker does, whichever of its modules does it.
log = logging.getLogger("streamproc.devenv.broker")


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
        cluster_id: str | None = None,
        sasl_ssl: SaslSslListener | None = None,
    ) -> None:
        self.port = int(port if port is not None else port_from_env(ENV_PORT) or DEFAULT_PORT)
        if controller_port is None:
            controller_port = port_from_env(ENV_CONTROLLER_PORT) or self.port + 1
        self.controller_port = int(controller_port)
        if self.port == self.controller_port:
            raise BrokerError(f"client and controller port are both {self.port}")
        self.state_dir = (Path(state_dir).expanduser() if state_dir is not None else default_state_dir()).resolve()
        self.kafka_version = kafka_version or os.environ.get(ENV_VERSION) or DEFAULT_KAFKA_VERSION
        self.lib_dir = Path(lib_dir).expanduser() if lib_dir is not None else default_lib_dir(self.kafka_version)
        self.heap = heap or os.environ.get(ENV_HEAP) or DEFAULT_HEAP
        self.extra_properties = dict(extra_properties or {})
        #: The id its storage is formatted with: one shared by the nodes of a cluster (else random).
        self.cluster_id = cluster_id
        #: An extra SASL_SSL listener (TLS + SCRAM-SHA-512) beside the PLAINTEXT one, or None.
        self.sasl_ssl = sasl_ssl
        #: True once start() of this object launched the JVM (False if it found one running).
        self.launched = False
        #: seconds from launching the JVM to the first metadata answer, set by start()
        self.last_start_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        # where kafka.log ended when this object launched the JVM: its errors show only that run
        self._log_offset = 0

    # ---- the state directory

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
        return self.state_dir / log_config_name(self.kafka_version)

    def _lock(self) -> contextlib.AbstractContextManager[None]:
        return file_lock(self.state_dir / ".lock")

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
        return jars_installed(self.lib_dir)

    def install(self) -> Path:
        """Resolve the broker jars into ``lib_dir`` with Maven (once; later calls return at once)."""
        if self.is_installed():
            return self.lib_dir
        find_java()  # without java the jars are of no use: say so before a long download
        return install_jars(self.lib_dir, self.kafka_version)

    # ---- lifecycle

    def is_running(self) -> bool:
        """True if this state directory's broker process is alive (it may still be starting)."""
        return self._running_pid() is not None

    def start(self, timeout: float = 90.0) -> str:
        """Start the broker (installing the jars and formatting the storage the first time) and
        return its bootstrap address once it answers metadata requests.

        If this state directory's broker already runs, wait for it to answer (at once if it does)
        and return its address.  ``timeout`` bounds that wait, not the one-time jar download.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            pid = self._running_pid()
            if pid is None:
                self._launch(timeout)
                return self.bootstrap
            running_port = self._running_port()
            if running_port is not None and running_port != self.port:
                raise BrokerError(
                    f"the broker of {self.state_dir} already runs on port {running_port} (pid {pid}), "
                    f"not {self.port}: stop it first or use another state directory")
            self._wait_ready(pid, timeout)
            return self.bootstrap

    def _launch(self, timeout: float) -> None:
        """Launch the JVM and wait for its first metadata answer; a JVM that gives none is killed."""
        ports = {"client": self.port, "controller": self.controller_port}
        if self.sasl_ssl is not None:
            ports["SASL_SSL"] = self.sasl_ssl.port
        check_ports_free(ports, self.state_dir)
        java = find_java()
        check_java(java, self.kafka_version)
        self.install()
        main_class, storage_tool = find_main_classes(self.lib_dir, self.kafka_version)
        self._write_configs()
        self.out_file.write_bytes(b"")  # kafka.out tells about this start only
        self._format_storage(java, storage_tool)

        cmd = jvm_command(java, main_class, [str(self.config_file)], kafka_version=self.kafka_version,
                          heap=self.heap, log_config=self._log_config, logs_dir=self.state_dir,
                          lib_dir=self.lib_dir)
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
            # a broker that never answered (or a start interrupted) leaves no JVM behind
            send_signal(proc.pid, signal.SIGKILL)
            wait_for_exit(proc.pid, 10, self._proc)
            self.pid_file.unlink(missing_ok=True)
            raise
        self.launched = True
        self.last_start_seconds = time.monotonic() - t0
        log.info("kafka %s up on %s in %.1f s (pid %d, log %s)", self.kafka_version, self.bootstrap,
                 self.last_start_seconds, proc.pid, self.log_file)

    def _write_configs(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(server_properties_file(self.server_properties()), encoding="ascii")
        self._log_config.write_text(broker_log_config(self.kafka_version, self.log_file), encoding="ascii")

    def server_properties(self) -> dict[str, str]:
        """The broker configuration this object writes (``extra_properties`` applied last)."""
        props = server_properties(self.port, self.controller_port, self.data_dir, self.extra_properties)
        return self.sasl_ssl.add_to(props) if self.sasl_ssl is not None else props

    def _format_storage(self, java: str, storage_tool: str) -> None:
        """Format ``data_dir`` as a new cluster, unless it holds one already."""
        if (self.data_dir / "meta.properties").is_file():
            return
        cluster_id = self.cluster_id or random_cluster_id()
        log.info("formatting %s (cluster id %s)", self.data_dir, cluster_id)
        # the tool logs to stdout (kafka.out), warnings only: kafka.log stays the broker's
        tool_log = self.state_dir / "tools-log4j.properties"
        tool_log.write_text(storage_tool_log_config(self.kafka_version), encoding="ascii")
        users = self.sasl_ssl.format_arguments() if self.sasl_ssl is not None else []
        cmd = jvm_command(java, storage_tool, ["format", "-t", cluster_id, "-c", str(self.config_file), *users],
                          kafka_version=self.kafka_version, heap="-Xmx256m", log_config=tool_log,
                          logs_dir=self.state_dir, lib_dir=self.lib_dir)
        with open(self.out_file, "ab") as out:
            res = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 cwd=self.state_dir, timeout=120)
        if res.returncode != 0:
            # leave no half-formatted directory behind: the next start formats afresh
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise BrokerError(f"formatting the storage in {self.data_dir} failed (exit {res.returncode})",
                              self.log_tail(30))

    def _wait_ready(self, pid: int, timeout: float) -> None:
        """Wait until the broker answers metadata requests; fail if it exits or the time is up."""
        wait_until_answering(pid, self._proc, self.port, timeout, lambda: self._launch_log_tail(pid, 40))

    def stop(self, timeout: float = 30.0) -> bool:
        """Controlled shutdown (SIGTERM), SIGKILL after ``timeout`` s.  False if nothing ran."""
        if not self.state_dir.is_dir():
            return False
        with self._lock():
            return self._stop(timeout)

    def _stop(self, timeout: float) -> bool:
        pid = self._running_pid()
        if pid is None:
            return False
        t0 = time.monotonic()
        send_signal(pid, signal.SIGTERM)
        if not wait_for_exit(pid, timeout, self._proc):
            log.warning("broker pid %d did not stop within %.0f s of SIGTERM: SIGKILL", pid, timeout)
            send_signal(pid, signal.SIGKILL)
            if not wait_for_exit(pid, 10, self._proc):
                raise BrokerError(f"broker pid {pid} survived SIGKILL", self.log_tail(20))
        self.pid_file.unlink(missing_ok=True)
        log.info("broker pid %d stopped in %.1f s", pid, time.monotonic() - t0)
        return True

    def kill(self) -> bool:
        """Crash the broker (SIGKILL), keeping its data: the next start() recovers.  False if nothing ran."""
        if not self.state_dir.is_dir():
            return False
        with self._lock():
            pid = self._running_pid()
            if pid is None:
                return False
            send_signal(pid, signal.SIGKILL)
            # A killed JVM may take more than 10 s to go on a loaded machine (seen in a CI
            # run: it was a zombie only later, while its memory was given back).
            if not wait_for_exit(pid, 60, self._proc):
                raise BrokerError(f"broker pid {pid} survived SIGKILL")
            self.pid_file.unlink(missing_ok=True)
            log.info("broker pid %d killed", pid)
            return True

    def freeze(self, frozen: bool = True) -> bool:
        """Hang the broker (SIGSTOP) or let it go on (SIGCONT), as a JVM stalled by its disk or
        its host would: connections stay open and nothing answers.  False if nothing ran."""
        with self._lock():
            pid = self._running_pid()
            if pid is not None:
                send_signal(pid, signal.SIGSTOP if frozen else signal.SIGCONT)
            return pid is not None

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

    def _running_pid(self) -> int | None:
        """The pid of this state directory's running broker, or None (a stale pid file is removed)."""
        pid = read_pid(self.pid_file)
        if pid is None:
            return None
        if is_alive(pid, self._proc) and runs_broker_with(pid, self.config_file):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def _running_port(self) -> int | None:
        """The client port in the config the running broker was started with."""
        try:
            return advertised_port(self.config_file.read_text(encoding="ascii"))
        except OSError:
            return None

    def status(self) -> dict[str, Any]:
        """running, pid, bootstrap, rss (bytes), plus version, state_dir and log file."""
        pid = self._running_pid()
        port = (self._running_port() or self.port) if pid is not None else self.port
        return {
            "running": pid is not None,
            "pid": pid,
            "bootstrap": f"{HOST}:{port}",
            "rss": rss_bytes(pid) if pid is not None else None,
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
        text = "\n".join(tail_lines(self.log_file, n, since))
        out = tail_lines(self.out_file, n)
        if any(line.strip() for line in out):
            text += ("\n" if text else "") + f"--- {self.out_file.name} ---\n" + "\n".join(out)
        return text


if __name__ == "__main__":  # the same commands as `streamproc broker`
    from streamproc.cli.main import main

    main(["broker", *sys.argv[1:]], prog_name="python -m streamproc.devenv.broker")
