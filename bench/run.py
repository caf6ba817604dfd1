#!/usr/bin/env python3
"""Native tracking, end to end: memlens side by side with heaptrack (stdlib only).

Builds bench/workloads/*.cc, runs every workload unprofiled, under `memlens run` and under
Debian's heaptrack, interleaved round-robin, then times each tool's analyzer on the capture of
the same run. Writes docs/benchmarks.md and prints it. See bench/README.md.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import TIMEOUT_S, run, tail, timed

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"  # gitignored: binaries, captures, logs
ITERATIONS = 4_000_000  # steps per workload (each step: one free + one allocation)
WORKLOADS = {  # name -> (source, args before the iteration count)
    "churn_1t": ("churn", ["1"]),
    "churn_4t": ("churn", ["4"]),
    "deep_stacks": ("deep_stacks", ["1"]),
}
TOOLS = ["unprofiled", "memlens", "heaptrack"]


def build(source):
    src, exe = BENCH / "workloads" / f"{source}.cc", RESULTS / "bin" / source
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        exe.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["g++", "-O2", "-g", "-std=c++17", "-pthread", str(src), "-o", str(exe)]
        print("build:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return exe


def one_run(tool, name, cmd, memlens, rep):
    """Runs cmd under tool; returns a dict of measurements, or {"error": ...}."""
    log = RESULTS / f"{name}.{tool}.log"
    base = RESULTS / f"{name}.{tool}.{rep}"
    memlens = memlens.get(tool)  # the build this column measures (memlens, memlens-baseline)
    if memlens:
        capture = Path(f"{base}.mlens")
        cmd = [str(memlens), "run", "-o", str(capture), "--"] + cmd
    elif tool == "heaptrack":
        cmd = ["heaptrack", "-o", str(base)] + cmd
    rc, wall, rss = run(cmd, log)
    text = log.read_text(errors="replace")
    found = re.search(r"allocs=(\d+) frees=(\d+) events=(\d+) vmhwm_kib=(\d+)", text)
    if rc != 0 or not found:
        for leftover in RESULTS.glob(f"{base.name}*"):
            leftover.unlink()
        return {"error": f"rc={rc}: {tail(text)}".replace("|", "/")}
    r = {"wall": wall, "rss": rss / 1024, "events": int(found[3]),
         "target_rss": int(found[4]) / 1024}
    if tool == "unprofiled":
        return r
    if tool == "heaptrack":  # Debian's 1.4 writes BASE.zst (BASE.gz without zstd); it says where
        where = re.search(r'heaptrack output will be written to "(.+?)"', text)
        capture = Path(where[1]) if where else base
        analyze = ["heaptrack_print", str(capture)]
    else:
        analyze = [str(memlens), "summary", str(capture)]
    if not capture.exists():
        return {"error": f"no capture at {capture}"}
    r["size"] = capture.stat().st_size
    arc, r["analyze"], out, err = timed(analyze)
    if arc != 0:  # keep the capture to look at
        r["analyze_error"] = f"rc={arc}: {tail(err + out)}".replace("|", "/")
        return r
    if tool == "heaptrack":
        seen = re.search(r"calls to allocation functions: (\d+)", out)
        r["seen"] = int(seen[1]) if seen else None
    else:
        try:
            r["seen"] = json.loads(timed(analyze + ["--json"])[2])["totals"]["allocations"]
        except (ValueError, KeyError, TypeError):
            r["seen"] = None
    capture.unlink()
    return r


def median(results, key):
    values = [r[key] for r in results if key in r and r[key] is not None]
    return statistics.median(values) if values else None


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def table(all_results, skipped):
    rows = ["| workload | tool | wall s | × unprofiled | target peak RSS MiB | largest process "
            "peak RSS MiB | capture MiB | capture B/event | allocations seen | analyzer s | "
            "analyzer s per M events |", "|" + "---|" * 11]
    for name, by_tool in all_results.items():
        events = median(by_tool["unprofiled"], "events")
        label = f"{name} ({events / 1e6:.1f} M events)" if events else name
        base = {i: r["wall"] for i, r in enumerate(by_tool["unprofiled"]) if "wall" in r}
        for tool in TOOLS:
            results = by_tool[tool]
            ok = [r for r in results if "error" not in r]
            if tool in skipped or not ok:
                why = skipped.get(tool) or (f"failed, {results[0]['error']}" if results else "-")
                rows.append(f"| {label} | {tool} | {why} |" + " |" * 8)
                continue
            ratios = [r["wall"] / base[i] for i, r in enumerate(results)
                      if "wall" in r and i in base]
            ratio = statistics.median(ratios) if ratios else None
            size = median(ok, "size")
            analyze = median(ok, "analyze")
            seen = median(ok, "seen")
            errors = {r.get("analyze_error") for r in ok} - {None}
            rows.append("| " + " | ".join([
                label, tool + (f" ({len(ok)}/{len(results)} ok)" if len(ok) < len(results) else ""),
                fmt(median(ok, "wall"), ".3f"), fmt(ratio, ".2f"),
                fmt(median(ok, "target_rss"), ".1f"),
                fmt(median(ok, "rss"), ".1f"), fmt(size and size / 2**20, ".1f"),
                fmt(size and events and size / events, ".2f"), fmt(seen, ",.0f"),
                (fmt(analyze, ".3f") if not errors else f"failed: {errors.pop()}"),
                fmt(analyze and events and analyze / (events / 1e6), ".3f")]) + " |")
    return "\n".join(rows)


def header(args, iterations):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    first_line = lambda cmd: (subprocess.run(cmd, capture_output=True, text=True).stdout
                              or "?").splitlines()[0]
    return f"""# Benchmarks: native tracking, end to end

Generated by `{' '.join(['python3', 'bench/run.py'] + sys.argv[1:])}` on {datetime.date.today()}.
Machine: {len(os.sched_getaffinity(0))} CPUs (nproc), {cpu}, Linux {platform.release()};
{first_line(['g++', '--version'])}; {first_line(['heaptrack', '--version'])}.
Runs per configuration: {args.runs}; {iterations:,} steps per workload.

Method. Each workload (bench/workloads, `g++ -O2 -g`) prints the exact number of allocation and
free calls it made itself (events = allocations + frees; the C++ runtime's handful of own
allocations are not counted), so both tools' capture sizes are divided by the same number.
Within each repetition the configurations run round-robin, the order rotating each repetition,
so machine noise hits all columns alike; an unmeasured unprofiled warm-up run comes first.
Wall time is `time.perf_counter` around the whole command (for heaptrack this includes waiting
for its `heaptrack_interpret | zstd` pipeline), median over the runs; "× unprofiled" is the
median of per-repetition ratios. "Target peak RSS" is the workload's own VmHWM at the end of
main, so it includes an in-process agent; "largest process peak RSS" is `/usr/bin/time -f %M`
on the command, the largest single process of its tree (for heaptrack: `heaptrack_interpret`,
which runs beside the target together with `zstd`; their memory adds up but is not summed here).
Analyzer time is `memlens summary CAPTURE` vs `heaptrack_print FILE` on the capture of the same
run, median over the runs; heaptrack symbolizes during the run (in `heaptrack_interpret`),
memlens in the analyzer. "Allocations seen" is `totals.allocations` of `memlens summary --json`
and heaptrack's "calls to allocation functions"; both include the runtime's own allocations.
"""


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, help="repetitions per configuration (default 5, --quick 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, 1/10 of the work")
    p.add_argument("--only", choices=sorted(WORKLOADS), help="run one workload")
    p.add_argument("--build-dir", type=Path, default=ROOT / "build", help="memlens CMake build dir")
    p.add_argument("--baseline-build-dir", type=Path,
                   help="a second memlens build (e.g. of the main branch) measured as column "
                        "'memlens-baseline' in the same runs: before/after side by side")
    args = p.parse_args()
    args.runs = args.runs or (1 if args.quick else 5)
    iterations = ITERATIONS // 10 if args.quick else ITERATIONS
    RESULTS.mkdir(parents=True, exist_ok=True)
    names = [args.only] if args.only else list(WORKLOADS)
    commands = {n: [str(build(WORKLOADS[n][0]))] + WORKLOADS[n][1] + [str(iterations)]
                for n in names}

    skipped = {}
    memlens = args.build_dir.resolve() / "bin" / "memlens"
    builds = {"memlens": memlens}
    if args.baseline_build_dir:
        builds["memlens-baseline"] = args.baseline_build_dir.resolve() / "bin" / "memlens"
        TOOLS.insert(2, "memlens-baseline")
        if not os.access(builds["memlens-baseline"], os.X_OK):
            skipped["memlens-baseline"] = "not built"
    if not os.access(memlens, os.X_OK):
        skipped["memlens"] = "not built"
        print(f"memlens: {memlens} not found; build it with `cmake -S {ROOT} -B {args.build_dir} "
              f"-G Ninja && cmake --build {args.build_dir}`. memlens rows are skipped.", flush=True)
    if not shutil.which("heaptrack") or not shutil.which("heaptrack_print"):
        skipped["heaptrack"] = "not installed"
        print("heaptrack: not installed (apt-get install heaptrack); heaptrack rows are skipped.")
    tools = [t for t in TOOLS if t not in skipped]

    results = {n: {t: [] for t in TOOLS} for n in names}
    for n in names:
        run(commands[n], RESULTS / f"{n}.warmup.log")
    for rep in range(args.runs):
        for n in names:
            order = tools[rep % len(tools):] + tools[:rep % len(tools)]
            for tool in order:
                r = one_run(tool, n, commands[n], builds, rep)
                results[n][tool].append(r)
                summary = r.get("error") or f"{r['wall']:.3f} s" + (
                    f", analyzer {r['analyze']:.3f} s" if "analyze" in r else "")
                print(f"[{rep + 1}/{args.runs}] {n:9} {tool:10} {summary}", flush=True)

    text = header(args, iterations) + "\n" + table(results, skipped) + "\n"
    (ROOT / "docs").mkdir(exist_ok=True)
    (ROOT / "docs" / "benchmarks.md").write_text(text)
    print("\n" + text)


if __name__ == "__main__":
    sys.exit(main())
