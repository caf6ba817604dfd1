#!/usr/bin/env python3
"""The cost of `memlens run --live` (issue 29), side by side with plain `memlens run` and the
program alone, in paired rounds (the order rotating from round to round):

  unprofiled   bench/workloads/churn 1 STEPS: allocation churn on one thread
  memlens      memlens run, in a terminal (tmux), the program's output redirected
  live         memlens run --live in the same terminal: the view loads the capture every second

Each column's time is the program's own life: from the start of the command to the moment the
churn process is gone (polled every 2 ms), so the view waiting for q afterwards is not counted.
Prints the medians over rounds of memlens's and live's wall time over the unprofiled run's in the
same round, and of live's over memlens's.

    python3 bench/live_bench.py [--runs N] [--steps N] [--build-dir build]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
COLUMNS = ("unprofiled", "memlens", "live")


def churn_running(marker):
    """Whether a process named churn runs with `marker` in its command line."""
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    for pid in out.split():
        try:
            if os.readlink(f"/proc/{pid}/exe").endswith("/churn"):
                return True
        except OSError:
            pass  # gone already
    return False


def timed_in_terminal(command, marker, live):
    """Seconds from starting `command` in a fresh tmux session until no process runs `marker`."""
    socket = f"memlens-bench-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-x", "150", "-y", "40",
                    command + "; sleep 600"], check=True)
    seen = False
    while True:
        if churn_running(marker):
            seen = True
        elif seen or time.perf_counter() - start > 120:
            break
        time.sleep(0.002)
    seconds = time.perf_counter() - start
    if live:
        subprocess.run(["tmux", "-L", socket, "send-keys", "q"], check=True)
    time.sleep(0.3)
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=3_000_000)
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    args = parser.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("live_bench needs tmux (Debian's tmux)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    churn = RESULTS / "churn"
    subprocess.run(["g++", "-O2", "-g", "-std=c++17", "-pthread",
                    str(REPO / "bench" / "workloads" / "churn.cc"), "-o", str(churn)], check=True)
    memlens = args.build_dir.resolve() / "bin" / "memlens"
    ratios = {c: [] for c in ("memlens", "live", "l/m")}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.runs):
            seconds = {}
            turn = round_ % len(COLUMNS)
            for column in COLUMNS[turn:] + COLUMNS[:turn]:
                capture = Path(tmp) / f"{column}.mlens"
                if capture.exists():
                    capture.unlink()
                steps = str(args.steps + round_)  # a marker unique to this run, for pgrep
                program = f"{churn} 1 {steps}"
                if column == "unprofiled":
                    start = time.perf_counter()
                    subprocess.run([str(churn), "1", steps], capture_output=True, check=True)
                    seconds[column] = time.perf_counter() - start
                    continue
                live = " --live" if column == "live" else ""
                command = (f"{memlens} run --no-index{live} -o {capture} -- {program} "
                           f"< /dev/null > /dev/null 2> {capture}.err")
                seconds[column] = timed_in_terminal(command, f"churn 1 {steps}", bool(live))
                if "allocs=" not in Path(f"{capture}.err").read_text():
                    raise SystemExit(f"{column} failed: {Path(f'{capture}.err').read_text()[-500:]}")
            ratios["memlens"].append(seconds["memlens"] / seconds["unprofiled"])
            ratios["live"].append(seconds["live"] / seconds["unprofiled"])
            ratios["l/m"].append(seconds["live"] / seconds["memlens"])
            print(f"round {round_ + 1}/{args.runs} done", flush=True)
    print("\n| steps | memlens × unprofiled | live × unprofiled | live × memlens |")
    print("|---|---|---|---|")
    print(f"| {args.steps:,} | " + " | ".join(f"{statistics.median(ratios[c]):.2f}"
                                               for c in ("memlens", "live", "l/m")) + " |")


if __name__ == "__main__":
    main()
