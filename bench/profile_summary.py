"""Top functions of a py-spy raw profile (`py-spy record --format raw`): self and cumulative.

    python bench/profile_summary.py PROFILE [--top 15]

Self: samples whose innermost frame is the function. Cumulative: samples with the
function anywhere on the stack (counted once per sample). Functions are named
`name (file)`, line numbers dropped, so a function's lines are added up. Frames on
(nearly) every sample, the entry chain down to the engine's loop, are left out of the
cumulative list.
"""

from __future__ import annotations

import argparse
import collections
import re

_LINE = re.compile(r":\d+\)$")


def summarize(path: str) -> tuple[int, collections.Counter, collections.Counter]:
    own: collections.Counter = collections.Counter()
    cumulative: collections.Counter = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(count)
            frames = [_LINE.sub(")", frame) for frame in stack.split(";")]
            total += n
            own[frames[-1]] += n
            for frame in set(frames):
                cumulative[frame] += n
    return total, own, cumulative


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    total, own, cumulative = summarize(args.profile)
    print(f"{total} samples")
    entry = [frame for frame, n in cumulative.items() if n >= 0.99 * total]
    for frame in entry:
        del cumulative[frame]
    for title, counter in (("self", own), ("cumulative", cumulative)):
        print(f"\ntop {args.top} by {title}" + (f" (without {len(entry)} entry frames on >= 99% of samples)"
                                                 if title == "cumulative" else "") + ":")
        for frame, n in counter.most_common(args.top):
            print(f"  {100 * n / total:5.1f}%  {n:6d}  {frame}")


if __name__ == "__main__":
    main()
