#!/usr/bin/env python3
"""The analyzer at scale: a capture of a billion events summarised, snapshotted and diffed, with
the analyzer's peak resident memory and its throughput in events per second (not a timed test).

Records bench/workloads/churn.cc with --threads threads and --events events (each step one free
and one allocation: events = 2 x steps), then runs, one after the other, each measured with
GNU time (wall and peak RSS):
  memlens summary CAPTURE            a full replay
  memlens index CAPTURE              the snapshot index (docs/snapshot-index.md), once
  memlens summary CAPTURE            again: from the index's end
  memlens summary CAPTURE@t=MID      a snapshot in the middle
  memlens summary CAPTURE@peak
  memlens diff CAPTURE@t=Q1 CAPTURE@t=Q3
The capture (about 3.7 bytes per event) goes to bench/results (gitignored), or --dir; it is
deleted at the end unless --keep. A billion events take about 4 GB and several minutes to record. It is recorded with
`memlens run --no-index`, so that the first summary is a replay and the index is built apart.

usage: bench/scale_bench.py [--events 1000000000] [--threads 1] [--keep] [--dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from harness import run

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BUILD = Path(os.environ.get("MEMLENS_BUILD_DIR", ROOT / "build"))
MEMLENS = BUILD / "bin" / "memlens"


def measured(name, cmd, folder):
    rc, wall, rss_kib = run([str(c) for c in cmd], folder / f"scale.{name}.log", timeout=3 * 3600)
    if rc != 0:
        sys.exit(f"{name} failed (rc={rc}): see {folder / f'scale.{name}.log'}")
    return wall, rss_kib / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=RESULTS)
    parser.add_argument("--keep", action="store_true", help="keep the capture and its index")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    exe = args.dir / "churn"
    subprocess.run(["g++", "-O2", "-g", "-std=c++17", "-pthread",
                    str(ROOT / "bench" / "workloads" / "churn.cc"), "-o", str(exe)], check=True)
    capture = args.dir / "scale.mlens"
    print(f"recording {args.events:,} events...", flush=True)
    record_wall, _ = measured("record", [MEMLENS, "run", "--no-index", "-o", capture, "--", exe,
                                         args.threads, args.events // 2], args.dir)
    size = capture.stat().st_size
    out = subprocess.run([str(MEMLENS), "summary", "--json", str(capture)], capture_output=True,
                         text=True, check=True, env={**os.environ, "MEMLENS_INDEX": "0"})
    data = json.loads(out.stdout)
    events, duration = data["totals"]["events"], data["capture"]["duration_s"]
    rows = [("summary (full replay)", [MEMLENS, "summary", capture])]
    rows.append(("index (once)", [MEMLENS, "index", capture]))
    rows.append(("summary (from the index's end)", [MEMLENS, "summary", capture]))
    rows.append((f"summary @t={duration / 2:.1f}", [MEMLENS, "summary", f"{capture}@t={duration / 2:.3f}"]))
    rows.append(("summary @peak", [MEMLENS, "summary", f"{capture}@peak"]))
    rows.append((f"diff @t={duration / 4:.1f} @t={3 * duration / 4:.1f}",
                 [MEMLENS, "diff", f"{capture}@t={duration / 4:.3f}", f"{capture}@t={3 * duration / 4:.3f}"]))
    print(f"capture: {events:,} events, {size / 2**30:.2f} GiB ({size / events:.2f} bytes/event), "
          f"recorded in {record_wall:.0f} s")
    print("| analysis | wall | events/s | analyzer peak RSS |")
    print("|---|---|---|---|")
    for name, cmd in rows:
        wall, rss = measured(name.split()[0], cmd, args.dir)
        print(f"| {name} | {wall:.1f} s | {events / wall / 1e6:.1f} M | {rss:.0f} MiB |", flush=True)
    if not args.keep:
        capture.unlink()
        Path(str(capture) + ".index").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
