"""A peer's bench result and ours in the same keys, and the ratios of a pair (`bench/peers.py`).

Both sides: `workflows`, `workflows_per_sec`, `activities_per_sec` (steps per second: the
peers' `activities_per_s`, a Restate step being one `ctx.run`), `p50_ms` / `p99_ms` (client
latency of a workflow: start sent -> result read), `seconds` (first start -> last result),
`cpu_seconds_by_role` in each side's own roles (Restate: server, service, client; Temporal:
server, client, which runs the worker too; ours: engine, workers, broker, client) and
`cpu_ms_per_workflow_total` (every role's CPU over the measured window, per workflow).
Ours adds the engines' committed transactions (`transactions_per_sec`, `..._per_workflow`).
"""

from __future__ import annotations

#: The key of each phase in the peers' JSON line.
PEER_PHASE_KEYS = {"a": "a_one_activity", "b": "b_seq10", "l": "l_latency_c1"}
#: What each phase compares: rates (ours / peer) and what is better lower (peer / ours).
HIGHER_IS_BETTER = {"a": ("workflows_per_sec",), "b": ("activities_per_sec",), "l": ()}
LOWER_IS_BETTER = ("p50_ms", "p99_ms", "cpu_ms_per_workflow_total")


def peer_measurement(phase: str, result: dict) -> dict:
    measured = result[PEER_PHASE_KEYS[phase]]
    latency = measured["e2e_latency_ms"]
    cpu = {("client" if name == "bench" else name): seconds for name, seconds in
           ((key[:-len("_cpu_s")], value) for key, value in measured.items() if key.endswith("_cpu_s"))}
    workflows = measured["workflows"]
    return {
        "workflows": workflows,
        "workflows_per_sec": measured.get("workflows_per_s"),
        "activities_per_sec": measured.get("activities_per_s"),
        "p50_ms": latency.get("p50"), "p99_ms": latency.get("p99"),
        "seconds": measured.get("makespan_s"),
        "cpu_seconds_by_role": cpu,
        "cpu_ms_per_workflow_total": round(sum(cpu.values()) * 1000 / workflows, 3),
        "versions": result.get("versions"),
        "detail": measured,
    }


def ours_measurement(line: dict) -> dict:
    """The keys of `peer_measurement` from a `bench/run.py` line (kept whole as `detail`)."""
    per_workflow = line.get("cpu_ms_per_workflow") or {}
    return {
        "workflows": line.get("workflows"),
        "workflows_per_sec": line.get("workflows_per_sec"),
        "activities_per_sec": line.get("activities_per_sec"),
        "p50_ms": line.get("p50_ms"), "p99_ms": line.get("p99_ms"),
        "seconds": line.get("seconds"),
        "cpu_seconds_by_role": line.get("cpu_seconds_by_role"),
        "cpu_ms_per_workflow_total": round(sum(per_workflow.values()), 3),
        "transactions_per_sec": line.get("transactions_per_sec"),
        "transactions_per_workflow": line.get("transactions_per_workflow"),
        "checkpoint_local_activities": line.get("checkpoint_local_activities"),
        # the part of the broker's CPU its JIT compiler used: near 0 once warm (bench/broker_jit.py)
        "broker_jit_cpu_seconds": (line.get("cpu_seconds") or {}).get("broker_jit"),
        "detail": line,
    }


def ratios(phase: str, peer: dict, ours: dict) -> dict:
    """Each compared key as a ratio above 1 when streamproc did better (None if a side lacks it)."""
    out = {}
    for key in HIGHER_IS_BETTER[phase]:
        out[key] = _ratio(ours.get(key), peer.get(key))
    for key in LOWER_IS_BETTER:
        out[key] = _ratio(peer.get(key), ours.get(key))
    return out


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 2)
