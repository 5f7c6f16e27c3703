"""The broker's jars, resolved from Maven Central by Maven into a cache directory, once per version.

``broker-pom.xml`` (shipped next to this module) names the core module ``kafka_2.13`` and a
logging backend; ``mvn dependency:copy-dependencies`` copies its runtime closure into the cache.
The cache is complete only when it holds the marker file: Maven works in a scratch directory that
is moved into place at the end, so an interrupted install leaves nothing half-done behind.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from importlib import resources
from pathlib import Path

from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_process import file_lock
from streamproc.devenv.broker_settings import uses_log4j2

# One logger for everything the local broker does, whichever of its modules does it.
log = logging.getLogger("streamproc.devenv.broker")

SCALA_BINARY = "2.13"
POM_NAME = "broker-pom.xml"
INSTALL_MARKER = ".complete"
MVN_TIMEOUT_S = 30 * 60
#: What Kafka 4.1's runtime jars weigh, to say what the first start fetches.
EXPECTED_MB = 45
#: Seconds between two progress lines while Maven downloads.
PROGRESS_INTERVAL_S = 3.0

# The classes the broker needs, by role; StorageTool moved between Kafka versions.
_MAIN_CLASSES = {
    "kafka.Kafka": ["kafka.Kafka"],
    "StorageTool": ["kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"],
}


def jars_installed(lib_dir: Path) -> bool:
    return (lib_dir / INSTALL_MARKER).is_file()


def core_jar_name(kafka_version: str) -> str:
    return f"kafka_{SCALA_BINARY}-{kafka_version}.jar"


def install_jars(lib_dir: Path, kafka_version: str) -> Path:
    """Resolve the jars of Kafka ``kafka_version`` into ``lib_dir`` (at once if they are there).

    A file lock next to ``lib_dir`` makes concurrent installs (e.g. test workers) resolve once.
    """
    mvn = shutil.which("mvn")
    if not mvn:
        raise BrokerError(
            "mvn not found on PATH: Maven is needed once to fetch the Kafka jars from Maven Central "
            "(e.g. apt-get install maven)"
        )
    with file_lock(lib_dir.parent / ".install.lock"):
        if jars_installed(lib_dir):
            return lib_dir
        log.info("fetching Kafka %s's jars from Maven Central, first run only (about %d MB, with Maven's own "
                 "plugins the first time Maven runs) into %s", kafka_version, EXPECTED_MB, lib_dir)
        t0 = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=".install-", dir=lib_dir.parent))
        try:
            jars = _resolve_with_maven(mvn, work, kafka_version)
            count = len(list(jars.glob("*.jar")))
            (jars / INSTALL_MARKER).write_text(f"kafka {kafka_version}\n{count} jars\n")
            if lib_dir.exists():  # an incomplete earlier install
                shutil.rmtree(lib_dir)
            os.replace(jars, lib_dir)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        size = sum(p.stat().st_size for p in lib_dir.glob("*.jar"))
        log.info("installed %d jars (%.0f MB) in %.1f s", count, size / 1e6, time.monotonic() - t0)
    return lib_dir


def _resolve_with_maven(mvn: str, work: Path, kafka_version: str) -> Path:
    """Run Maven in ``work``; returns the directory holding the resolved jars."""
    pom = work / "pom.xml"
    pom.write_text(resources.files(__package__).joinpath(POM_NAME).read_text(encoding="utf-8"),
                   encoding="utf-8")
    jars = work / "lib"
    cmd = [
        # Not -q: in batch mode Maven prints a "Downloaded from" line per file, our progress.
        mvn, "-B", "-Dstyle.color=never", "-f", str(pom),
        f"-Dkafka.version={kafka_version}",
        f"-Dkafka.logging={'log4j2' if uses_log4j2(kafka_version) else 'reload4j'}",
        "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={jars}",
    ]
    tally = DownloadTally()
    lines: list[str] = []
    try:
        with subprocess.Popen(cmd, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) as mvn_process:
            # A Maven that hangs without a word is killed too: the loop below waits for lines.
            watchdog = threading.Timer(MVN_TIMEOUT_S, mvn_process.kill)
            watchdog.daemon = True
            watchdog.start()
            for line in mvn_process.stdout:
                if not tally.feed(line):
                    lines.append(line.rstrip("\n"))
                    del lines[:-40]
                if tally.due(time.monotonic(), PROGRESS_INTERVAL_S):
                    log.info("fetched %d files, %.1f MB so far", tally.files, tally.bytes / 1e6)
            returncode = mvn_process.wait()
            if not watchdog.is_alive():
                raise BrokerError(f"mvn did not finish within {MVN_TIMEOUT_S} s")
            watchdog.cancel()
    except OSError as exc:
        raise BrokerError(f"cannot run mvn: {exc}") from None
    res = subprocess.CompletedProcess(cmd, returncode, "\n".join(lines))
    output = "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", res.stdout).splitlines()[-40:])
    if res.returncode != 0:
        raise BrokerError(
            f"mvn could not resolve org.apache.kafka:kafka_{SCALA_BINARY}:{kafka_version} "
            f"(exit {res.returncode}); is Maven Central reachable and the version right?",
            output, "mvn output",
        )
    core = jars / core_jar_name(kafka_version)
    if not core.is_file():
        raise BrokerError(f"mvn finished but {core.name} is not among the resolved jars", output, "mvn output")
    return jars


class DownloadTally:
    """Counts Maven's "Downloaded from central: URL (12 kB at 3.4 MB/s)" lines."""

    _LINE = re.compile(r"Downloaded from [^:]+: \S+ \(([\d.,]+) (B|kB|KB|MB|GB)")
    _UNIT = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9}

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0.0
        self._reported_at: float | None = None
        self._reported_files = 0

    def feed(self, line: str) -> bool:
        """Whether `line` was a download (counted)."""
        found = self._LINE.search(line)
        if found is None:
            return "Downloading from" in line
        self.files += 1
        self.bytes += float(found.group(1).replace(",", "")) * self._UNIT[found.group(2)]
        return True

    def due(self, now: float, interval_s: float) -> bool:
        """Whether to report now: something new, and the interval passed since the last report."""
        if self.files == self._reported_files:
            return False
        if self._reported_at is None:
            self._reported_at = now  # the first interval starts with the first file
            return False
        if now - self._reported_at < interval_s:
            return False
        self._reported_at, self._reported_files = now, self.files
        return True


def find_main_classes(lib_dir: Path, kafka_version: str) -> tuple[str, str]:
    """(broker main class, storage tool class) as found in the jars; fails loudly if one is missing."""
    core = lib_dir / core_jar_name(kafka_version)
    # the core jar holds both in every version so far: look there first
    jars = [core] + sorted(p for p in lib_dir.glob("kafka*.jar") if p != core)
    found: dict[str, str] = {}
    for jar in jars:
        try:
            with zipfile.ZipFile(jar) as z:
                names = set(z.namelist())
        except (OSError, zipfile.BadZipFile) as e:
            raise BrokerError(f"cannot read {jar}: {e}; delete {lib_dir} and install again") from None
        for role, candidates in _MAIN_CLASSES.items():
            cls = next((c for c in candidates if c.replace(".", "/") + ".class" in names), None)
            if role not in found and cls is not None:
                found[role] = cls
        if len(found) == len(_MAIN_CLASSES):
            return found["kafka.Kafka"], found["StorageTool"]
    missing = [role for role in _MAIN_CLASSES if role not in found]
    raise BrokerError(f"no {' / '.join(missing)} class in the jars of {lib_dir}")
