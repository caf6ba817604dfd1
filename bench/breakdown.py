#!/usr/bin/env python3
"""Cost per event by part: where memlens's time goes on one workload (stdlib + Linux perf).

Runs a bench workload under `memlens run` inside `perf record -e cpu-clock` (one sample per
100 µs of CPU time, every thread), classifies each sample by the function it landed in, and
prints nanoseconds of CPU per event for each part, median over the runs:

  guard   the interposers themselves (malloc/free/new/delete entry, re-entrancy check)
  unwind  stack capture: memlens's unwinder, its CFI rule lookup, libunwind, _dl_find_object
  append  the ring: reserving, writing and publishing the record (RecordAlloc/RecordRelease)
  writer  everything on the writer thread (draining, interning stacks, encoding, zstd, write)
  index   the `memlens run` process itself: indexing the capture as it is written, at idle
          priority (cmd_run.cc), on CPU time the program and the writer leave over
  program the program's own work (compare: the unprofiled row)

    python3 bench/breakdown.py                 # churn_1t and deep_stacks, 5 runs each
    python3 bench/breakdown.py --only deep_stacks --runs 3 --build-dir build
"""
import argparse
import collections
import re
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (the workloads and their build)

PERIOD_NS = 100_000
UNWIND = re.compile(r"CaptureStack|CommitStack|FindFrameRule|FindFde|ParseCie|Execute|"
                    r"CaptureWithLibunwind|OuterFramesIntact|_dl_find_object|unw_|_ULx86_64")
APPEND = re.compile(r"RecordAlloc|RecordRelease|Reserve|Publish|ThreadBuffer|PublishPieces|"
                    r"ReadPythonFrames")


def classify(samples):
    """samples: [(comm, tid, dso, sym)] -> Counter of part -> sample count."""
    writer_tids = {tid for _, tid, _, sym in samples if "Writer::" in sym}
    parts = collections.Counter()
    for comm, tid, dso, sym in samples:
        if comm == "memlens":  # the CLI's process (the program's has the program's name)
            parts["index"] += 1
        elif tid in writer_tids:
            parts["writer"] += 1
        elif "libunwind" in dso or UNWIND.search(sym):
            parts["unwind"] += 1
        elif "libmemlens" in dso and APPEND.search(sym):
            parts["append"] += 1
        elif "libmemlens" in dso:
            parts["guard"] += 1
        else:
            parts["program"] += 1
    return parts


def profile(cmd, events, tmp):
    data = tmp / "perf.data"
    subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-c", str(PERIOD_NS), "-o",
                    str(data), "--"] + cmd, check=True, capture_output=True)
    counts = classify(read_samples(data))
    return {k: v * PERIOD_NS / events for k, v in counts.items()}


def read_samples(data):
    """[(comm, tid, dso, sym)] of a perf.data file."""
    out = subprocess.run(["perf", "script", "-i", str(data), "-F", "comm,tid,ip,sym,dso"],
                         check=True, capture_output=True, text=True).stdout
    samples = []
    for line in out.splitlines():
        m = re.match(r"\s*(.*?)\s+(\d+)\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            samples.append((m[1], m[2], m[4], m[3]))
    return samples


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--only", choices=sorted(bench.WORKLOADS))
    p.add_argument("--iterations", type=int, default=bench.ITERATIONS // 4)
    p.add_argument("--build-dir", type=Path, default=bench.ROOT / "build")
    args = p.parse_args()
    memlens = args.build_dir.resolve() / "bin" / "memlens"
    tmp = bench.RESULTS / "breakdown"
    tmp.mkdir(parents=True, exist_ok=True)
    names = [args.only] if args.only else ["churn_1t", "deep_stacks"]
    parts = ["guard", "unwind", "append", "writer", "index", "program"]
    print("| workload | run | ns/event: " + " | ".join(parts + ["total"]) + " |")
    print("|" + "---|" * (len(parts) + 3))
    for name in names:
        source, extra = bench.WORKLOADS[name]
        cmd = [str(bench.build(source))] + extra + [str(args.iterations)]
        log = subprocess.run(cmd, capture_output=True, text=True).stderr
        events = int(re.search(r"events=(\d+)", log)[1])
        for label, full in (("unprofiled", cmd),
                            ("memlens", [str(memlens), "run", "-o", str(tmp / "c.mlens"), "--"] + cmd)):
            runs = [profile(full, events, tmp) for _ in range(args.runs)]
            med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in parts}
            total = statistics.median(sum(r.values()) for r in runs)
            print(f"| {name} | {label} | " + " | ".join(f"{med[k]:.1f}" for k in parts)
                  + f" | {total:.1f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
