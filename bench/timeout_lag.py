"""How late the engine times out started jobs: TIMED_OUT event timestamp - the job's deadline.

No workers: the bench creates jobs, reads their keys from the CREATED events and STARTs
each itself. The deadline is fixed when the engine processes the START (now + timeout),
so the timeout must outlast the processing of all the STARTs for the deadlines to pass
after it. Burst: one timeout for all jobs, so the deadlines fall within the time the
engine took to process the STARTs (reported as deadline_spread_ms). Spread: timeouts
staggered over `spread` seconds.
"""

from __future__ import annotations

from datetime import timedelta

from bench.common import Bench, EventTap, loadavg, peak_rss_mb, percentiles, say
from streamproc.client import SyncClient

PARTITIONS = 4


def run(bench: Bench, quick: bool) -> dict:
    jobs = 2000 if quick else 10_000
    spread_ms = 3000 if quick else 10_000
    base_ms = 5000 if quick else 10_000  # outlasts processing all STARTs (checked below)
    out: dict = {"jobs": jobs, "partitions": PARTITIONS, "load1_at_start": loadavg()}
    with bench.running_engine("timeouts", PARTITIONS) as engine:
        tap = EventTap(bench, PARTITIONS)
        client = SyncClient(bench.bootstrap, bench.namespace)
        out["burst"] = _phase(client, tap, "bench-burst", [base_ms] * jobs)
        out["spread"] = _phase(client, tap, "bench-spread",
                               [base_ms + i * spread_ms // jobs for i in range(jobs)])
        out["spread"]["spread_ms_asked"] = spread_ms
        out["engine_peak_rss_mb"] = peak_rss_mb(engine)
        client.close()
        tap.close()
    return out


def _phase(client: SyncClient, tap: EventTap, queue: str, timeouts_ms: list[int]) -> dict:
    jobs = len(timeouts_ms)
    tap.forget()
    request_timeout = {}
    for timeout in timeouts_ms:
        rid = client.create_job(queue, None, timeout=timedelta(milliseconds=timeout))
        request_timeout[rid] = timeout
    client.flush()
    tap.wait(lambda: tap.count("CREATED") >= jobs, 60 + jobs / 100, f"{jobs} CREATED")
    keys = [e.key for e in tap.decode("CREATED") if e.request_id in request_timeout]
    for key in keys:
        client.start_job(key, 1, "bench")
    client.flush()
    tap.wait(lambda: tap.count("STARTED") >= jobs, 60 + jobs / 100, f"{jobs} STARTED")
    wait_s = 60 + max(timeouts_ms) / 1000 + jobs / 100
    tap.wait(lambda: tap.count("TIMED_OUT") >= jobs, wait_s, f"{jobs} TIMED_OUT")
    tap.poll(0.5)
    started = tap.decode("STARTED")
    timed_out = [e for e in tap.decode("TIMED_OUT") if e.record_type == "EVENT"]
    deadlines = [e.value["deadline_ms"] for e in timed_out]
    lags = [e.timestamp_ms - e.value["deadline_ms"] for e in timed_out]
    last_start = max(e.timestamp_ms for e in started)
    result = {
        "jobs": jobs,
        "lag_ms": percentiles(lags),
        "min_lag_ms": min(lags),
        "deadline_spread_ms": max(deadlines) - min(deadlines),
        "starts_processed_ms": last_start - min(e.timestamp_ms for e in started),
        "all_started_before_first_deadline": last_start < min(deadlines),
        "timed_out_events": tap.count("TIMED_OUT"),
        "rejections": tap.rejections(),
    }
    say(queue, result)
    return result
