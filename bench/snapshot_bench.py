#!/usr/bin/env python3
"""What a snapshot costs with the snapshot index, against a replay without it (not a timed test).

Records bench/workloads/churn.cc (single thread, --events allocation and free events), then,
side by side in each round: `memlens summary` of the whole capture (a full replay), and
`summary CAPTURE@t=...` at several moments and `@peak`, with the index (MEMLENS_INDEX unset) and
without (MEMLENS_INDEX=0). Prints medians over --runs rounds as ratios to the full replay, the
one-off cost of building the index (`memlens index`), and the index's size against the
capture's. Files go to bench/results (gitignored).

usage: bench/snapshot_bench.py [--events 40000000] [--runs 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness import timed

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BUILD = Path(os.environ.get("MEMLENS_BUILD_DIR", ROOT / "build"))
MEMLENS = BUILD / "bin" / "memlens"


def seconds(cmd, env=None):
    rc, wall, _, err = timed(list(map(str, cmd)), env)
    if rc != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed: {err.strip()}")
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=40_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    exe = RESULTS / "churn"
    subprocess.run(["g++", "-O2", "-g", "-std=c++17", "-pthread",
                    str(ROOT / "bench" / "workloads" / "churn.cc"), "-o", str(exe)], check=True)
    capture = RESULTS / "snapshot_churn.mlens"
    subprocess.run([str(MEMLENS), "run", "--no-index", "-o", str(capture), "--", str(exe), "1",
                    str(args.events // 2)], check=True, capture_output=True)
    summary = json.loads(subprocess.run([str(MEMLENS), "summary", "--json", str(capture)],
                                        capture_output=True, text=True, check=True).stdout)
    duration = summary["capture"]["duration_s"]
    moments = [f"t={duration * f:.3f}" for f in (0.1, 0.5, 0.9)] + ["peak"]

    build = []
    times = {("full", None): []}
    for m in moments:
        times[(m, "index")] = []
        times[(m, "no index")] = []
    no_index = {**os.environ, "MEMLENS_INDEX": "0"}
    for _ in range(args.runs):
        build.append(seconds([MEMLENS, "index", capture]))
        times[("full", None)].append(seconds([MEMLENS, "summary", capture], no_index))
        for m in moments:
            times[(m, "index")].append(seconds([MEMLENS, "summary", f"{capture}@{m}"]))
            times[(m, "no index")].append(seconds([MEMLENS, "summary", f"{capture}@{m}"], no_index))
    full = statistics.median(times[("full", None)])
    index_bytes = Path(str(capture) + ".index").stat().st_size
    print(f"capture: {summary['totals']['events']:,} events, {capture.stat().st_size / 2**20:.1f} MiB;"
          f" index {index_bytes / 2**20:.2f} MiB ({100 * index_bytes / capture.stat().st_size:.1f}%)")
    print(f"medians of {args.runs} rounds, as a fraction of a full replay (`summary CAPTURE`):")
    print(f"  building the index (`memlens index`): {statistics.median(build) / full:.2f}x")
    print("  | snapshot | with the index | without |")
    print("  |---|---|---|")
    for m in moments:
        with_index = statistics.median(times[(m, "index")]) / full
        without = statistics.median(times[(m, "no index")]) / full
        print(f"  | @{m} | {with_index:.2f}x | {without:.2f}x |")


if __name__ == "__main__":
    main()
