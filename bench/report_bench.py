#!/usr/bin/env python3
"""The HTML report of a big capture: its size and how fast it paints (not a timed test).

Builds bench/workloads/many_stacks.c, records it under `memlens run` (about 10 million events
over 100,000 distinct stacks by default), writes `memlens report`, and opens the report in
headless Chromium through Playwright (bench/report_paint.mjs; needs `npm ci` in tests/report and
Debian's chromium). Prints the HTML size (bar: at most 20 MB) and the time from navigation to
the first paint of the drawn page (bar: under 3 s), median of --runs loads, plus the time
`memlens report` took. Files go to bench/results (gitignored).

usage: bench/report_bench.py [--paths 100000] [--allocations 5000000] [--runs 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BUILD = Path(os.environ.get("MEMLENS_BUILD_DIR", ROOT / "build"))
MEMLENS = BUILD / "bin" / "memlens"
SIZE_BAR = 20 * 1000 * 1000
PAINT_BAR_MS = 3000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=100_000)
    parser.add_argument("--allocations", type=int, default=5_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    (RESULTS / "bin").mkdir(parents=True, exist_ok=True)
    exe = RESULTS / "bin" / "many_stacks"
    subprocess.run(["cc", "-O0", "-g", "-fno-omit-frame-pointer", "-fno-inline", "-o", str(exe),
                    str(ROOT / "bench" / "workloads" / "many_stacks.c")], check=True)
    capture = RESULTS / "many_stacks.mlens"
    html = RESULTS / "many_stacks.html"
    subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", str(exe), str(args.paths),
                    str(args.allocations)], check=True, stdout=subprocess.DEVNULL)
    summary = json.loads(subprocess.run([str(MEMLENS), "summary", str(capture), "--json"],
                                        check=True, capture_output=True, text=True).stdout)
    start = time.monotonic()
    subprocess.run([str(MEMLENS), "report", str(capture), "-o", str(html)], check=True,
                   stderr=subprocess.DEVNULL)
    report_s = time.monotonic() - start
    size = html.stat().st_size
    loads = []
    for _ in range(args.runs):
        out = subprocess.run(["node", str(ROOT / "bench" / "report_paint.mjs"), str(html)],
                             check=True, capture_output=True, text=True).stdout
        loads.append(json.loads(out))
    painted = statistics.median(load["painted_ms"] for load in loads)
    fcp = statistics.median(load["first_contentful_paint_ms"] or 0 for load in loads)
    ready = statistics.median(load["ready_ms"] for load in loads)
    print(f"capture: {summary['totals']['events']:,} events, "
          f"{capture.stat().st_size / 1e6:.1f} MB; memlens report: {report_s:.1f} s")
    print(f"HTML size: {size / 1e6:.2f} MB (bar {SIZE_BAR / 1e6:.0f} MB) "
          f"{'ok' if size <= SIZE_BAR else 'OVER'}")
    print(f"first paint of the drawn page: {painted:.0f} ms median of {args.runs} "
          f"(bar {PAINT_BAR_MS} ms) {'ok' if painted < PAINT_BAR_MS else 'OVER'}; "
          f"first contentful paint {fcp:.0f} ms, views drawn at {ready:.0f} ms")
    return 0 if size <= SIZE_BAR and painted < PAINT_BAR_MS else 1


if __name__ == "__main__":
    sys.exit(main())
