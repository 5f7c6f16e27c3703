"""What `streamproc dev` prints once the engine is ready: what runs where, and the commands
to try next (Temporal's `server start-dev` prints its addresses the same way)."""

from __future__ import annotations

import shlex

from streamproc.settings import DEFAULT_BOOTSTRAP, DEFAULT_NAMESPACE, Settings


def dev_summary(settings: Settings, *, broker_dir: str | None, example: bool, metrics_port: int,
                ready_after_s: float) -> str:
    """The lines to print. `broker_dir`: the state dir of a broker this command started
    (None: the one STREAMPROC_BOOTSTRAP names was used)."""
    broker = (f"{settings.bootstrap} (started here, data in {broker_dir}; stopped on Ctrl-C)" if broker_dir
              else f"{settings.bootstrap} (already running)")
    workers = ("job worker on task queue 'hello'; workflow worker on 'orders' (OrderWorkflow: reserve, charge)"
               if example else "none (--example runs two)")
    metrics = (f"http://localhost:{metrics_port}/metrics, /healthz, /readyz" if metrics_port
               else "off (--metrics-port 9464 serves them)")
    lines = [
        "streamproc dev",
        f"  broker     {broker}",
        f"  namespace  {settings.namespace} (topics {settings.namespace}.commands, .events, .changelog)",
        f"  engine     {settings.engine_id}, state in {settings.state_dir}",
        f"  workers    {workers}",
        f"  metrics    {metrics}",
        f"ready in {ready_after_s:.1f} s; try, in another shell:",
    ]
    prefix = []  # what another shell needs to reach the same broker and topics
    if settings.bootstrap != DEFAULT_BOOTSTRAP:
        prefix += ["--bootstrap", settings.bootstrap]
    if settings.namespace != DEFAULT_NAMESPACE:
        prefix += ["--namespace", settings.namespace]
    for command in (["job", "create", "hello", "--payload", '{"name": "you"}'], ["events", "tail"],
                    ["workflow", "list"], ["worker", "run", "payments", "--handler", "mymodule:charge"]):
        lines.append("  " + shlex.join(["streamproc", *prefix, *command]))
    lines.append("Ctrl-C stops everything.")
    return "\n".join(lines)
