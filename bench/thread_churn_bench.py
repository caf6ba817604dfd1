#!/usr/bin/env python3
"""A program that starts a thread per task, under each profiler: the server's own peak RSS
and how many requests a second it answers, against the server alone, in paired rounds (the
order rotating from round to round).

  workload   bench/workloads/thread_per_request.py: ThreadingHTTPServer (a thread per request,
             as `python -m http.server`), sent --requests GETs one after another, a new
             connection each, by a client in this process
  columns    unprofiled; memlens (memlens run); memlens baseline (--baseline-build-dir, another
             build, e.g. main); memray (python -m memray run); heaptrack

Each exited thread must leave nothing behind under a profiler: a server that has answered a
million requests must not hold a million threads' worth of the profiler's memory. Prints, per
column, the medians over rounds of the server's peak RSS over the unprofiled run's in the same
round, and of its requests a second over the unprofiled run's.

    python3 bench/thread_churn_bench.py [--runs N] [--requests N] [--build-dir build]
        [--baseline-build-dir DIR] [--columns unprofiled,memlens,...]
"""
import argparse
import http.client
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "bench" / "workloads" / "thread_per_request.py"
COLUMNS = ("unprofiled", "memlens", "memlens baseline", "memray", "heaptrack")


def command(column, args, workdir, port_file, peak_file):
    server = [sys.executable, str(SERVER), str(port_file), str(peak_file)]
    if column == "unprofiled":
        return server
    if column in ("memlens", "memlens baseline"):
        build = args.build_dir if column == "memlens" else args.baseline_build_dir
        return [str(Path(build) / "bin" / "memlens"), "run", "-o", str(workdir / "c.mlens"),
                "--"] + server
    if column == "memray":
        return [sys.executable, "-m", "memray", "run", "-q", "-f", "-o",
                str(workdir / "c.bin"), str(SERVER), str(port_file), str(peak_file)]
    if column == "heaptrack":
        return ["heaptrack", "-o", str(workdir / "c")] + server
    raise ValueError(column)


def one_run(column, args):
    """(peak RSS KiB, requests a second) of the server under `column`."""
    with tempfile.TemporaryDirectory(prefix="churn-bench-") as tmp:
        workdir = Path(tmp)
        port_file, peak_file = workdir / "port", workdir / "peak"
        proc = subprocess.Popen(command(column, args, workdir, port_file, peak_file),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{column}: the server did not start")
            time.sleep(0.01)
        port = int(port_file.read_text())
        start = time.perf_counter()
        for _ in range(args.requests):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", "/")
            connection.getresponse().read()
            connection.close()
        rate = args.requests / (time.perf_counter() - start)
        # The server is the profiler's child under memlens run and heaptrack (whose script
        # would end without waiting for it): signal the Python process alone, and wait for the
        # figure it writes.
        python = os.path.realpath(sys.executable)
        for pid in subprocess.run(["pgrep", "-f", str(port_file)], capture_output=True,
                                  text=True).stdout.split():
            try:
                if os.path.realpath(f"/proc/{pid}/exe") == python:
                    os.kill(int(pid), signal.SIGTERM)
            except OSError:
                pass  # gone already
        proc.wait(timeout=300)
        deadline = time.monotonic() + 60
        while not peak_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return int(peak_file.read_text()), rate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--build-dir", default=str(REPO / "build"))
    parser.add_argument("--baseline-build-dir")
    parser.add_argument("--columns", default=",".join(COLUMNS))
    args = parser.parse_args()
    columns = [c for c in args.columns.split(",") if c]
    unknown = set(columns) - set(COLUMNS)
    if unknown:
        parser.error(f"unknown columns: {', '.join(sorted(unknown))} (known: {', '.join(COLUMNS)})")
    if "unprofiled" not in columns:
        columns.insert(0, "unprofiled")
    if not args.baseline_build_dir and "memlens baseline" in columns:
        columns.remove("memlens baseline")
    if "heaptrack" in columns and not shutil.which("heaptrack"):
        print("heaptrack: not installed, left out")
        columns.remove("heaptrack")
    if "memray" in columns and subprocess.run([sys.executable, "-c", "import memray"],
                                              capture_output=True).returncode != 0:
        print("memray: not installed for this Python, left out")
        columns.remove("memray")
    peaks = {c: [] for c in columns}
    rates = {c: [] for c in columns}
    for round_index in range(args.runs):
        order = columns[round_index % len(columns):] + columns[:round_index % len(columns)]
        results = {}
        for column in order:
            print(f"round {round_index + 1}/{args.runs}: {column}", file=sys.stderr, flush=True)
            results[column] = one_run(column, args)
        base_peak, base_rate = results["unprofiled"]
        for column in columns:
            peaks[column].append(results[column][0] / base_peak)
            rates[column].append(results[column][1] / base_rate)
        print(f"  unprofiled: {base_peak} KiB peak, {base_rate:.0f} requests/s", file=sys.stderr)
    print(f"\n{args.requests} requests, one thread each; medians of {args.runs} paired rounds\n")
    print(f"| {'column':<18} | peak RSS x unprofiled | requests/s x unprofiled |")
    print(f"|{'-' * 20}|{'-' * 22}|{'-' * 25}|")
    for column in columns:
        print(f"| {column:<18} | {statistics.median(peaks[column]):20.2f} | "
              f"{statistics.median(rates[column]):23.2f} |")


if __name__ == "__main__":
    main()
