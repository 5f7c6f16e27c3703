"""py-spy on the engine and the worker processes of a workflow benchmark, one raw profile each.

`Profiler(prefix, rig)` starts sampling (on-CPU, or wall clock with `idle`; without pausing the processes);
`stop()` ends it and returns the files written: PREFIX.engine-0, PREFIX.worker-0, ...
Summarise one with `python bench/profile_summary.py FILE`.
"""

from __future__ import annotations

import subprocess
import time

from bench.common import say


class Profiler:
    def __init__(self, prefix: str, rig, idle: bool = False) -> None:
        targets = {**{f"engine-{n}": e for n, e in enumerate(rig.engines)},
                   **{f"worker-{n}": w for n, w in enumerate(rig.workers)}}
        self.files = {name: f"{prefix}.{name}" for name in targets}
        self._spies = [subprocess.Popen(["py-spy", "record", "--pid", str(proc.pid), "--format", "raw",
                                         "--rate", "200", "--nonblocking", *(["--idle"] if idle else []),
                                         "-o", self.files[name]],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for name, proc in targets.items()]
        time.sleep(1.0)  # py-spy attaches before the measured load starts

    def stop(self) -> list[str]:
        for spy in self._spies:
            spy.send_signal(2)  # SIGINT: py-spy writes its profile and exits
        for spy in self._spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                say("py-spy did not stop in time")
        return sorted(self.files.values())
