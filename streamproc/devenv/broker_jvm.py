"""The Java runtime the broker runs on: finding ``java``, checking its version, the JVM command line."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from streamproc.devenv.broker_errors import BrokerError
from streamproc.devenv.broker_settings import ENV_JVM_OPTS, minimum_java_version, uses_log4j2


def find_java() -> str:
    """``$JAVA_HOME/bin/java`` if there is one, else ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise BrokerError("java not found (PATH or JAVA_HOME): the broker needs a Java 17+ runtime "
                          "(e.g. apt-get install openjdk-17-jre-headless)")
    return java


def check_java(java: str, kafka_version: str) -> None:
    """Fail with a clear message if ``java`` is too old for Kafka ``kafka_version``."""
    major = _java_major_version(java)
    if major is None:
        return  # unknown format: let the JVM speak for itself
    need = minimum_java_version(kafka_version)
    if major < need:
        raise BrokerError(f"Kafka {kafka_version} needs Java {need}+, but {java} is Java {major}")


@functools.cache  # a JVM takes a while to print its version, and restarts ask again
def _java_major_version(java: str) -> int | None:
    try:
        res = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise BrokerError(f"cannot run {java} -version: {e}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', res.stderr + res.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8.0_402" is Java 8


def jvm_command(java: str, main_class: str, args: list[str], *, kafka_version: str, heap: str,
                log_config: Path, logs_dir: Path, lib_dir: Path) -> list[str]:
    """The command line running ``main_class`` from the jars in ``lib_dir``, the way Kafka's own
    scripts run it (G1, exit on OOM, headless), but with a third of the heap for new objects.

    With Kafka's 20 ms pause goal G1 keeps the young generation at its 5% minimum (50 MB of
    1 GB); the broker allocates ~100 MB/s under load, so it collected twice a second, and on
    a 2-core machine shared with the engine each pause took 12-213 ms (6-9% of the time
    stopped), the tail of every commit. A fixed third (NewRatio, which G1 honours and which
    follows the heap options) collects every few seconds: 1-2 pauses instead of 13-16 in a
    10 s run. Generational ZGC was measured too (docs/performance.md): no pauses, but up to
    70% more broker CPU on 2 cores."""
    if uses_log4j2(kafka_version):
        logging_opt = f"-Dlog4j2.configurationFile={log_config}"
    else:
        logging_opt = f"-Dlog4j.configuration={log_config.as_uri()}"
    return [
        java,
        *shlex.split(heap),
        "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:NewRatio=2",
        "-XX:+ExplicitGCInvokesConcurrent", "-XX:+ExitOnOutOfMemoryError",
        # Fewer stops of every thread (safepoints). A safepoint waits for the last running
        # thread to reach it; on a 2-core machine with dozens of runnable threads (measured:
        # run queue 44-63) that took up to 2.5 s, and the whole broker was silent meanwhile.
        # Most such stops had no work to do: the "Cleanup" safepoint forced every second
        # (487 of 845 in 24 starts of the restart tests; all of the ones over 0.5 s), and
        # the GCs a starting broker's class loading triggers at the 21 MB metaspace default
        # (74; the broker settles at ~51 MB). With both: 17 safepoints per broker start
        # instead of 36, and 3.3 s spent reaching them over 30 starts instead of 9.0 s over
        # 24, on a machine twice as loaded (GC pauses themselves still grow with the load).
        "-XX:+UnlockDiagnosticVMOptions", "-XX:GuaranteedSafepointInterval=0", "-XX:MetaspaceSize=96m",
        "-Djava.awt.headless=true",
        *shlex.split(os.environ.get(ENV_JVM_OPTS, "")),  # after ours, so they win
        logging_opt,
        f"-Dkafka.logs.dir={logs_dir}",
        "-cp", str(lib_dir / "*"),
        main_class, *args,
    ]
