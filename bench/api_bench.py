#!/usr/bin/env python3
"""The per-call cost of the instrumentation API in three states, side by side in one run:

  absent      the program alone (no agent: memlens.h's calls find no function)
  passive     libmemlens.so preloaded but not recording this process (MEMLENS_TRACKED names
              another pid, as in a child of a recorded process): each call reaches the agent,
              which returns at once
  recording   under `memlens run`: each call is recorded (heap calls with their stack)

Workloads: bench/workloads/api_calls.cc (C++, built with g++ -O2 against include/) and
api_calls.py (Python API). The states run interleaved, --runs times (default 5); the table
gives the median over runs of each run's median batch, in ns per operation, and the ratio to
the same operation's absent figure. Writes docs/benchmarks-api.md (unless --no-write).

    python3 bench/api_bench.py [--runs N] [--calls N] [--build-dir build] [--no-write]
"""
import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
STATES = ("absent", "passive", "recording")


def build_workload(build_dir):
    RESULTS.mkdir(parents=True, exist_ok=True)
    binary = RESULTS / "api_calls"
    subprocess.run(["g++", "-O2", "-g", "-std=c++17", f"-I{REPO / 'include'}",
                    str(REPO / "bench" / "workloads" / "api_calls.cc"), "-o", str(binary)],
                   check=True)
    # Copies, so a rebuild during the run does not change what is measured.
    memlens = RESULTS / "memlens_api"
    (memlens / "bin").mkdir(parents=True, exist_ok=True)
    (memlens / "lib").mkdir(parents=True, exist_ok=True)
    shutil.copy2(build_dir / "bin" / "memlens", memlens / "bin" / "memlens")
    for lib in (build_dir / "lib").glob("libmemlens*.so"):
        shutil.copy2(lib, memlens / "lib" / lib.name)
    return binary, memlens


def run_state(state, command, memlens, workdir):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"))
    env.pop("MEMLENS_TRACKED", None)
    if state == "passive":
        env["LD_PRELOAD"] = str(memlens / "lib" / "libmemlens.so")
        env["MEMLENS_TRACKED"] = "1"  # not this process's pid: the agent stays passive
    elif state == "recording":
        command = [str(memlens / "bin" / "memlens"), "run", "-o", str(workdir / "api.mlens"),
                   "--"] + command
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        sys.exit(f"{state}: {' '.join(command)} failed: {out.stderr.strip()[-300:]}")
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^op=(\S+) ns=([0-9.]+)$", out.stdout, re.M)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200000, help="calls per batch (C++)")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    binary, memlens = build_workload(args.build_dir)
    workloads = {"c": [str(binary), str(args.calls)],
                 "python": [sys.executable, str(REPO / "bench" / "workloads" / "api_calls.py"),
                            str(max(args.calls // 4, 1000))]}
    samples = {}  # (op, state) -> [ns per op, one per run]
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.runs):
            for command in workloads.values():
                for state in STATES:
                    for op, ns in run_state(state, command, memlens, Path(work)).items():
                        samples.setdefault((op, state), []).append(ns)
    ops = list(dict.fromkeys(op for op, _ in samples))
    lines = ["| operation | " + " | ".join(f"{s} (ns)" for s in STATES) +
             " | passive / absent | recording / absent |",
             "|---|" + "---:|" * (len(STATES) + 2)]
    for op in ops:
        med = {s: statistics.median(samples[(op, s)]) for s in STATES}
        ratio = lambda s: f"{med[s] / med['absent']:.1f}x" if med["absent"] > 0 else "-"
        lines.append(f"| {op} | " + " | ".join(f"{med[s]:.1f}" for s in STATES) +
                     f" | {ratio('passive')} | {ratio('recording')} |")
    table = "\n".join(lines)
    cpu = platform.processor() or platform.machine()
    model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), cpu)
    header = (f"Medians of {args.runs} runs (states interleaved), each run's figure the median of 5 "
              f"batches; {args.calls} calls per C++ batch, {max(args.calls // 4, 1000)} per Python "
              f"batch; {os.cpu_count()} CPUs ({model}), shared and noisy: read ratios, not "
              "absolute times.")
    print(header + "\n\n" + table)
    if not args.no_write:
        doc = REPO / "docs" / "benchmarks-api.md"
        text = doc.read_text() if doc.exists() else ""
        begin, end = "<!-- api-bench:begin -->", "<!-- api-bench:end -->"
        block = f"{begin}\n{header}\n\n{table}\n{end}"
        if begin in text:
            text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
        else:
            text += "\n" + block + "\n"
        doc.write_text(text)


if __name__ == "__main__":
    main()
