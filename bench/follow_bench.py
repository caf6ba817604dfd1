#!/usr/bin/env python3
"""The cost of `memlens run --follow-children` (issue 29), side by side with plain `memlens run`
and the program alone, in paired rounds (the order rotating from round to round):

  unprofiled   bench/workloads/fanout 50 STEPS: 50 children by fork and exec, one after another
  memlens      memlens run: the parent recorded, its children not
  follow       memlens run --follow-children: the parent and its 50 children, each a capture

for children of three sizes (STEPS = 0, 2,000 and 50,000 malloc/free steps each). Prints, per
size, the medians over rounds of each column's wall time over the unprofiled run's in the same
round, and of follow's over memlens's. With --baseline-build-dir, a fourth column, follow under
that build (another commit's), and follow's time over it.

    python3 bench/follow_bench.py [--runs N] [--build-dir build] [--baseline-build-dir DIR]
"""
import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SIZES = (0, 2000, 50000)
COLUMNS = ("unprofiled", "memlens", "follow")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--baseline-build-dir", type=Path)
    args = parser.parse_args()
    columns = COLUMNS + (("baseline",) if args.baseline_build_dir else ())
    RESULTS.mkdir(parents=True, exist_ok=True)
    fanout = RESULTS / "fanout"
    subprocess.run(["cc", "-O2", "-g", str(REPO / "bench" / "workloads" / "fanout.c"), "-o",
                    str(fanout)], check=True)
    memlens = args.build_dir.resolve() / "bin" / "memlens"
    baseline = args.baseline_build_dir.resolve() / "bin" / "memlens" if args.baseline_build_dir else None
    ratios = {(size, column): [] for size in SIZES
              for column in ("memlens", "follow", "f/m", "baseline", "f/b")}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.runs):
            for size in SIZES:
                program = [str(fanout), "50", str(size)]
                seconds = {}
                turn = round_ % len(columns)
                order = columns[turn:] + columns[:turn]
                for column in order:
                    out = Path(tmp) / f"{column}"
                    shutil.rmtree(out, ignore_errors=True)
                    if out.with_suffix(".mlens").exists():
                        out.with_suffix(".mlens").unlink()
                    command = {"unprofiled": program,
                               "memlens": [str(memlens), "run", "--no-index", "-o",
                                           str(out.with_suffix(".mlens")), "--", *program],
                               "follow": [str(memlens), "run", "--no-index",
                                          "--follow-children", "-o", str(out), "--", *program],
                               "baseline": [str(baseline), "run", "--no-index",
                                            "--follow-children", "-o", str(out), "--",
                                            *program]}[column]
                    start = time.perf_counter()
                    done = subprocess.run(command, capture_output=True, text=True)
                    seconds[column] = time.perf_counter() - start
                    if done.returncode != 0 or f"children=50 steps={size}" not in done.stderr:
                        raise SystemExit(f"{column} failed: {done.stderr[-500:]}")
                    if column in ("follow", "baseline"):
                        captures = len(list(out.glob("*.mlens")))
                        if captures != 51:
                            raise SystemExit(f"follow wrote {captures} captures, not 51")
                ratios[(size, "memlens")].append(seconds["memlens"] / seconds["unprofiled"])
                ratios[(size, "follow")].append(seconds["follow"] / seconds["unprofiled"])
                ratios[(size, "f/m")].append(seconds["follow"] / seconds["memlens"])
                if baseline:
                    ratios[(size, "baseline")].append(seconds["baseline"] / seconds["unprofiled"])
                    ratios[(size, "f/b")].append(seconds["follow"] / seconds["baseline"])
            print(f"round {round_ + 1}/{args.runs} done", flush=True)
    shown = ("memlens", "follow", "f/m") + (("baseline", "f/b") if baseline else ())
    print("\n| steps per child | memlens × unprofiled | follow × unprofiled | follow × memlens |"
          + (" baseline follow × unprofiled | follow × baseline |" if baseline else ""))
    print("|---|---|---|---|" + ("---|---|" if baseline else ""))
    for size in SIZES:
        cells = [f"{statistics.median(ratios[(size, c)]):.2f}" for c in shown]
        print(f"| {size:,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
