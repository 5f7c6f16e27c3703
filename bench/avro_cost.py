"""What Avro encoding and decoding costs per record the engine writes or reads:
`python -m bench.avro_cost [--workflows N] [--rounds R]`.

The records are the ones `codec.encode` is given while N workflows of each shape of
`bench/workflow_engine_cost.py` run in process (events, tasks, replies, and the commands
the client and workers send), grouped by kind: record type, value type and intent. Prints
one JSON line: for each kind, the median over R rounds (each of about COUNTED records of
the kind) of the microseconds to encode one record, and to decode one as the engine reads
a command. Under callgrind (run as `bench/workflow_engine_cost.py`'s docstring says) it
also prints the instructions per record of each kind, which do not vary with the
machine's load. The records of a kind repeat in a round, so large longs are always found
in the encoder's cache: the engine's own records find them less often.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.in_process_engine import Instructions  # noqa: E402
from bench.workflow_engine_cost import SHAPES, one_shape  # noqa: E402
from streamproc.protocol import codec  # noqa: E402
from streamproc.protocol.records import Record  # noqa: E402


#: Records of each kind encoded (and decoded) per round: the captured ones, repeated.
COUNTED = 1000


def captured_records(workflows: int) -> dict[str, list[Record]]:
    """Every record encoded while the workflows run, copied as it was given, by kind."""
    seen: dict[str, list[Record]] = {}
    encode = codec.encode

    def spy(record: Record) -> bytes:
        kept = copy.deepcopy(record)
        seen.setdefault(f"{record.record_type.value}:{record.value_type}:{record.intent}", []).append(kept)
        return encode(record)

    codec.encode = spy
    try:
        for shape in SHAPES:
            one_shape(shape, workflows, 4, 100, None)
    finally:
        codec.encode = encode
    return dict(sorted(seen.items()))


def _median_us(work: Callable[[], None], per: int, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        work()
        times.append((time.perf_counter() - began) / per * 1e6)
    return round(statistics.median(times), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=20, help="workflows of each shape (default 20)")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    if args.workflows < 1 or args.rounds < 1:
        parser.error("--workflows and --rounds must be at least 1")
    kinds = captured_records(args.workflows)
    encode_us, decode_us, instructions = {}, {}, Instructions()
    # Under callgrind, what starting and stopping a count costs (a subprocess each) is
    # counted too: measured with nothing between, and taken off each kind's count.
    instructions.start()
    instructions.stop("nothing")
    for kind, records in kinds.items():
        records = records * max(1, COUNTED // len(records))
        encoded = [codec.encode(r) for r in records]  # and any layout made: not counted
        encode_us[kind] = _median_us(lambda: [codec.encode(r) for r in records], len(records), args.rounds)
        decode_us[kind] = _median_us(lambda: [codec.decode(d, codec.AVRO_HEADERS) for d in encoded], len(records),
                                     args.rounds)
        for step, work in (("encode", lambda: [codec.encode(r) for r in records]),
                           ("decode", lambda: [codec.decode(d, codec.AVRO_HEADERS) for d in encoded])):
            instructions.start()
            work()
            instructions.stop(f"{step}:{kind}")
            instructions[f"{step}:{kind}"] = (instructions[f"{step}:{kind}"] - instructions["nothing"]) // len(records)
    instructions.pop("nothing", None)
    line = {"scenario": "avro_cost", "workflows_per_shape": args.workflows, "rounds": args.rounds,
            "records": {k: len(v) for k, v in kinds.items()}, "encode_us": encode_us, "decode_us": decode_us}
    if instructions:
        line["instructions_per_record"] = dict(instructions)
    print(json.dumps(line))


if __name__ == "__main__":
    main()
