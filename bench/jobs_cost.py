"""What a job costs the broker at a paced rate, counted rather than timed: `python -m bench.jobs_cost`.

The rig of `jobs_latency_by_rate` (an engine and two job workers, processes of their own,
a client creating jobs at a paced rate), with the broker's own counters read before and
after each rate (`bench/broker_requests.py`: `per_unit`). For each partition count and rate it prints
one JSON line, per job: the engine's transactions; the broker's requests by API (the
broker's own included); produce requests per transaction by topic, which is how many
partitions of each a transaction wrote (librdkafka sends one partition per produce
request); fetch requests by topic (the engine reads `commands`, job workers their `tasks`
topic and their `replies`, the bench its `events`); records in by topic. Counts hold on a
busy machine, where timings do not; how many commands a transaction carries at the
higher rates still depends on how busy the machine is. Needs a local broker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.broker_requests import broker_counts, counts_since, per_unit  # noqa: E402
from bench.common import Bench  # noqa: E402
from bench.jobs_rig import JobsRig  # noqa: E402

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,1000", help="paced jobs/s, comma separated")
    parser.add_argument("--partitions", default="1,4", help="partition counts, comma separated")
    parser.add_argument("--seconds", type=float, default=5, help="seconds per rate (default 5)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--start-unconfirmed", action="store_true", help="job workers with --start-unconfirmed")
    parser.add_argument("--push", action="store_true", help="job workers with --push (jobs pushed to them)")
    parser.add_argument("--spread-creates", action="store_true",
                        help="each CREATE to its request id's partition, not kept on one for a while")
    parser.add_argument("--commit-interval-ms", type=float, default=0, help="the engine's (default 0: off)")
    args = parser.parse_args()
    bench = Bench("jobs_cost")
    if bench.broker_pid is None:
        parser.error("the broker's counters are read from its JVM: a local broker is needed")
    bench.job_worker_options = (("--start-unconfirmed",) if args.start_unconfirmed else ()) + \
        (("--push",) if args.push else ())
    if args.commit_interval_ms:
        bench.engine_options = ("--commit-interval-ms", str(args.commit_interval_ms))
    try:
        for partitions in (int(p) for p in args.partitions.split(",")):
            with JobsRig(bench, partitions, args.workers, args.spread_creates) as rig:
                for rate in (float(r) for r in args.rates.split(",")):
                    before = broker_counts(bench.broker_pid)
                    measured = rig.measure(int(rate * args.seconds), rate)
                    grown = counts_since(before, broker_counts(bench.broker_pid), bench.namespace)
                    line = {"partitions": partitions, "rate_per_sec": rate, "jobs": measured["jobs"],
                            "workers": args.workers, "start_unconfirmed": args.start_unconfirmed, "push": args.push,
                            "commit_interval_ms": args.commit_interval_ms, "spread_creates": args.spread_creates,
                            **per_unit(grown, measured["jobs"], measured["transactions"])}
                    print(json.dumps(line), flush=True)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
