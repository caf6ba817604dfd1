#!/usr/bin/env python3
"""What explaining resident memory (issue 30, docs/rss.md) costs, on three workloads recorded
with `memlens run`:

  churn      bench/workloads/churn 1 STEPS: allocation churn on one thread, a small process
  python     bench/workloads/py_objects.py: Python objects made and dropped, ~200 mappings
  big_heap   tests/programs/rss_phases: 500 MB in 100-byte blocks, freed, trimmed

For each, over --runs runs (medians):
  reading share   the writer's readings of /proc/PID/smaps and pagemap (each kMappings record's
                  read_ns, summed) over the recording's duration: the 1% rule's result
  readings        how many were written, and the median interval between them
  rss / summary   the analyzer: `memlens rss CAPTURE --json` (a replay that keeps the blocks by
                  owner, and another to the last sample when blocks changed after it) over
                  `memlens summary CAPTURE --json` (served from the snapshot index once built)

    python3 bench/rss_bench.py [--runs N] [--steps N] [--build-dir build]
"""
import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


def timed(cmd):
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - start, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", default="3000000")
    parser.add_argument("--build-dir", default=str(REPO / "build"))
    args = parser.parse_args()
    build = Path(args.build_dir)
    memlens = str(build / "bin" / "memlens")
    RESULTS.mkdir(parents=True, exist_ok=True)
    churn = RESULTS / "churn"
    subprocess.run(["g++", "-O2", "-g", "-pthread", str(REPO / "bench" / "workloads" / "churn.cc"),
                    "-o", str(churn)], check=True)
    workloads = {
        "churn": [str(churn), "1", args.steps],
        "python": ["python3", str(REPO / "bench" / "workloads" / "py_objects.py")],
        "big_heap": [str(build / "tests" / "programs" / "rss_phases")],
    }
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, command in workloads.items():
            shares, counts, intervals, ratios = [], [], [], []
            for k in range(args.runs):
                capture = f"{work}/{name}-{k}.mlens"
                subprocess.run([memlens, "run", "-o", capture, "--", *command],
                               capture_output=True, check=True)
                summary_s, summary = timed([memlens, "summary", capture, "--json"])
                summary_s, summary = timed([memlens, "summary", capture, "--json"])  # indexed
                rss_s, rss = timed([memlens, "rss", capture, "--json"])
                duration = json.loads(summary)["capture"]["duration_s"]
                samples = json.loads(rss)["over_time"]
                shares.append(sum(s["read_ms"] for s in samples) / 1e3 / duration)
                counts.append(len(samples))
                gaps = [b["seconds"] - a["seconds"] for a, b in zip(samples, samples[1:])]
                intervals.append(statistics.median(gaps) if gaps else duration)
                ratios.append(rss_s / summary_s)
            rows.append((name, statistics.median(shares), statistics.median(counts),
                         statistics.median(intervals), statistics.median(ratios)))
    lines = ["| workload | reading share | readings | median interval | rss / summary |",
             "|---|---|---|---|---|"]
    for name, share, count, interval, ratio in rows:
        lines.append(f"| {name} | {100 * share:.2f}% | {count:.0f} | {1000 * interval:.0f} ms | "
                     f"{ratio:.2f} |")
    text = "\n".join(lines)
    print(text)
    (RESULTS / "rss_bench.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
