"""bench/peers.py's reading of a peer's result and of ours, and which way its ratios point."""

from __future__ import annotations

import argparse

from bench.peer_results import ours_measurement, peer_measurement, ratios
from bench.peers import OURS, _invalid, _summary

# The shape of a Restate/Temporal bench line (peers' bench.py), phase a only.
PEER_LINE = {
    "versions": {"restate_server": "restate-server 1.7.12"},
    "a_one_activity": {"workflows": 1000, "workflows_per_s": 900.0, "activities_per_s": 900.0, "makespan_s": 1.11,
                       "e2e_latency_ms": {"p50": 100.0, "p99": 150.0}, "server_cpu_s": 1.0, "service_cpu_s": 0.8,
                       "bench_cpu_s": 0.2},
}
# The keys of a bench/run.py line that peers.py reads.
OURS_LINE = {"scenario": "workflows_1_local_activity", "workflows": 1000, "workflows_per_sec": 1800.0,
             "activities_per_sec": 1800.0, "p50_ms": 50.0, "p99_ms": 300.0, "seconds": 0.56,
             "cpu_seconds_by_role": {"engine": 0.4, "workers": 0.3, "broker": 0.2, "client": 0.1},
             "cpu_ms_per_workflow": {"engine": 0.4, "workers": 0.3, "broker": 0.2, "client": 0.1},
             "transactions_per_sec": 200.0, "transactions_per_workflow": 0.11, "checkpoint_local_activities": False}


def test_the_peer_and_ours_come_out_in_the_same_keys():
    peer = peer_measurement("a", PEER_LINE)
    ours = ours_measurement(OURS_LINE)
    assert peer["cpu_seconds_by_role"] == {"server": 1.0, "service": 0.8, "client": 0.2}
    assert peer["cpu_ms_per_workflow_total"] == 2.0 and ours["cpu_ms_per_workflow_total"] == 1.0
    compared = ("workflows_per_sec", "activities_per_sec", "p50_ms", "p99_ms", "cpu_ms_per_workflow_total")
    assert all(peer[k] is not None and ours[k] is not None for k in compared)


def test_a_ratio_above_one_means_streamproc_did_better():
    r = ratios("a", peer_measurement("a", PEER_LINE), ours_measurement(OURS_LINE))
    assert r == {"workflows_per_sec": 2.0, "p50_ms": 2.0, "p99_ms": 0.5, "cpu_ms_per_workflow_total": 2.0}


def test_latency_phase_compares_latency_and_cpu_only():
    peer = {"p50_ms": 5.0, "p99_ms": 8.0, "cpu_ms_per_workflow_total": 4.0, "workflows_per_sec": 200.0}
    ours = {"p50_ms": 10.0, "p99_ms": 8.0, "cpu_ms_per_workflow_total": None, "workflows_per_sec": None}
    assert ratios("l", peer, ours) == {"p50_ms": 0.5, "p99_ms": 1.0, "cpu_ms_per_workflow_total": None}


def test_summary_is_the_median_over_the_pairs_that_ran():
    pairs = [{"workflows_per_sec": 1.0}, None, {"workflows_per_sec": 3.0}, {"workflows_per_sec": 2.0}]
    line = _summary("restate", "a", "local", pairs)
    assert line["pairs"] == 3 and line["ratios_median"] == {"workflows_per_sec": 2.0}


def test_restate_b_runs_both_local_modes_and_temporal_remote_activities():
    assert [scenario for _, scenario, _ in OURS["restate"]["b"]] == ["workflows_10_sequential_local"] * 2
    assert [options for _, _, options in OURS["restate"]["b"]] == [("--checkpoint-local-activities",), ()]
    assert {s for modes in OURS["temporal"].values() for _, s, _ in modes} == {
        "workflows_1_activity", "workflows_10_sequential", "workflow_latency_single"}


def test_bad_arguments_are_one_line():
    args = argparse.Namespace(phases="abl", pairs=3, n=1000, n_seq=200, latency_n=100, warmup=None)
    assert "BENCH_PEER_TEMPORAL" in _invalid(args, "temporal", "")
    assert _invalid(args, "temporal", "python bench.py") is None
    assert "--phases" in _invalid(argparse.Namespace(**{**vars(args), "phases": "ax"}), "temporal", "python bench.py")
    assert "--pairs" in _invalid(argparse.Namespace(**{**vars(args), "pairs": 0}), "temporal", "python bench.py")
