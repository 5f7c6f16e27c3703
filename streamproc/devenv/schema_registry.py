"""A local Schema Registry for development and tests: Apicurio Registry, from Maven Central.

Why Apicurio Registry 2.6: the events topic needs a *real* registry that speaks Confluent's
REST API (its wire format, subjects, compatibility levels), and only Maven Central, PyPI, npm
and Debian can be reached from where the project is built and tested. Confluent's own
registry is published on Confluent's repository only; Karapace (Aiven's) is no longer on
PyPI. Apicurio Registry publishes a runnable distribution (``apicurio-registry-app-<v>-all.tar.gz``,
a Quarkus runner jar and its libraries) to Maven Central, keeps schemas in memory (H2) with no
other service, and answers Confluent's API under ``/apis/ccompat/v7``, which
``confluent_kafka.schema_registry`` uses unchanged. The 2.6 line runs on Java 17 (the broker's);
Apicurio 3.x needs Java 21.

    with LocalSchemaRegistry(port=18081) as registry:   # installs once, then starts (~6-8 s)
        url = registry.url                            # http://127.0.0.1:18081/apis/ccompat/v7

or from a shell, in the foreground until Ctrl-C:

    python -m streamproc.devenv.schema_registry --port 8081

The distribution (142 MB) is fetched once with Maven into ``$XDG_CACHE_HOME/streamproc/
apicurio-registry-<version>/`` (default ``~/.cache``), through a scratch Maven repository
that is deleted afterwards, so no second copy stays in ``~/.m2``. Its log goes to
``$XDG_STATE_HOME/streamproc/schema-registry/`` (default ``~/.local/state``). Schemas live only
as long as the process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_jvm import find_java
from streamproc.devenv.broker_process import file_lock, tail_lines

APICURIO_VERSION = "2.6.13.Final"
ARTIFACT = "io.apicurio:apicurio-registry-app:{version}:tar.gz:all"
#: Confluent's REST API, as Apicurio serves it.
CCOMPAT_PATH = "/apis/ccompat/v7"
HOST = "127.0.0.1"
DEFAULT_PORT = 8081
#: A development registry does little work and starts often: C1 only and the serial GC start it
#: in 6-8 s instead of 20-24 s on a busy 2-core machine (measured, load 10).
DEFAULT_JVM_OPTIONS = "-Xms64m -Xmx384m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
INSTALL_MARKER = ".complete"
MVN_TIMEOUT_S = 20 * 60
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"


class SchemaRegistryError(BrokerError):
    """The local registry could not be installed or started; carries its last log lines."""

    def __init__(self, message: str, log_tail: str = "", label: str = "last registry log lines") -> None:
        super().__init__(message, log_tail, label)


def default_install_dir(version: str = APICURIO_VERSION) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "streamproc" / f"apicurio-registry-{version}"


def default_log_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "streamproc" / "schema-registry"


def runner_jar(install_dir: Path, version: str = APICURIO_VERSION) -> Path:
    return install_dir / f"apicurio-registry-app-{version}-runner.jar"


def install(install_dir: Path | None = None, version: str = APICURIO_VERSION) -> Path:
    """Fetch and unpack the registry into `install_dir` once; later calls return at once.
    A file lock beside it makes concurrent installs (test workers) fetch once."""
    install_dir = install_dir or default_install_dir(version)
    if (install_dir / INSTALL_MARKER).is_file():
        return install_dir
    mvn = shutil.which("mvn")
    if not mvn:
        raise SchemaRegistryError("mvn not found on PATH: Maven is needed once to fetch Apicurio Registry "
                                  "from Maven Central (e.g. apt-get install maven)")
    find_java()  # without java the download is of no use: say so first
    install_dir.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(install_dir.parent / f".{install_dir.name}.lock"):
        if (install_dir / INSTALL_MARKER).is_file():
            return install_dir
        started = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=".install-", dir=install_dir.parent))
        try:
            archive = _fetch(mvn, work, version)
            unpacked = work / "unpacked"
            with tarfile.open(archive) as tar:
                # Python >= 3.11.4 checks each member's path; older ones extract as before.
                tar.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
            if not runner_jar(unpacked, version).is_file():
                raise SchemaRegistryError(f"{archive.name} holds no {runner_jar(unpacked, version).name}")
            size = archive.stat().st_size
            (unpacked / INSTALL_MARKER).write_text(
                f"apicurio-registry {version}\n{size} bytes fetched in {time.monotonic() - started:.0f} s\n")
            if install_dir.exists():  # an incomplete earlier install
                shutil.rmtree(install_dir)
            os.replace(unpacked, install_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return install_dir


def _fetch(mvn: str, work: Path, version: str) -> Path:
    out = work / "out"
    cmd = [mvn, "-B", "-q", "-Dstyle.color=never", f"-Dmaven.repo.local={work / 'repository'}",
           f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={ARTIFACT.format(version=version)}",
           f"-DoutputDirectory={out}"]
    try:
        res = subprocess.run(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=MVN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SchemaRegistryError(f"mvn did not fetch Apicurio Registry within {MVN_TIMEOUT_S} s") from None
    archives = list(out.glob("*.tar.gz"))
    if res.returncode != 0 or not archives:
        raise SchemaRegistryError(f"mvn could not fetch {ARTIFACT.format(version=version)} (exit {res.returncode}); "
                                  "is Maven Central reachable?", "\n".join(res.stdout.splitlines()[-30:]), "mvn output")
    return archives[0]


class LocalSchemaRegistry:
    """One Apicurio Registry process on 127.0.0.1, in-memory storage, owned by this object."""

    def __init__(self, port: int = DEFAULT_PORT, install_dir: Path | None = None, log_dir: Path | None = None,
                 jvm_options: str = DEFAULT_JVM_OPTIONS, version: str = APICURIO_VERSION) -> None:
        self.port = port
        self.version = version
        self.install_dir = install_dir or default_install_dir(version)
        self.log_dir = log_dir
        self.jvm_options = jvm_options
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_file: Path | None = None
        #: Seconds from launching the JVM to its first answer, set by start().
        self.start_seconds: float | None = None

    @property
    def url(self) -> str:
        """What `STREAMPROC_SCHEMA_REGISTRY_URL` and Confluent's clients take."""
        return f"http://{HOST}:{self.port}{CCOMPAT_PATH}"

    def start(self, timeout: float = 120.0) -> str:
        """Install if needed, launch, and return the URL once the API answers."""
        install(self.install_dir, self.version)
        log_dir = self.log_dir or default_log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_file = log_dir / "apicurio-registry.log"
        command = [find_java(), *self.jvm_options.split(), "-Djava.awt.headless=true",
                   f"-Dquarkus.http.port={self.port}", f"-Dquarkus.http.host={HOST}",
                   "-Dquarkus.log.console.color=false",
                   "-jar", str(runner_jar(self.install_dir, self.version))]
        started = time.monotonic()
        with open(self.log_file, "wb") as log:  # this run's log only
            self.proc = subprocess.Popen(command, cwd=log_dir, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = started + timeout
        while not self.answers():
            if self.proc.poll() is not None:
                raise SchemaRegistryError(f"Apicurio Registry exited with code {self.proc.returncode} at start",
                                          self._log_tail())
            if time.monotonic() > deadline:
                self.stop()
                raise SchemaRegistryError(f"Apicurio Registry did not answer on port {self.port} within {timeout} s",
                                          self._log_tail())
            time.sleep(0.25)
        self.start_seconds = time.monotonic() - started
        return self.url

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)

    def _log_tail(self) -> str:
        return "\n".join(tail_lines(self.log_file, 30)) if self.log_file else ""

    def __enter__(self) -> LocalSchemaRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamproc.devenv.schema_registry",
                                     description="Run a local Schema Registry (Apicurio, in memory) until Ctrl-C.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    registry = LocalSchemaRegistry(port=args.port)
    try:
        if not (registry.install_dir / INSTALL_MARKER).is_file():
            print(f"fetching Apicurio Registry {APICURIO_VERSION} (142 MB, first run only) ...", flush=True)
        url = registry.start()
    except SchemaRegistryError as exc:
        print(f"Error: {exc}")
        return 1
    print(f"schema registry ready: export STREAMPROC_SCHEMA_REGISTRY_URL={url}  (log: {registry.log_file})",
          flush=True)
    try:
        registry.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        registry.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
