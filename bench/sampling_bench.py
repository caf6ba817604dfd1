#!/usr/bin/env python3
"""Sampling mode, end to end: what `memlens run --sample` costs, and whether it scales with threads.

Two measurements, each with the configurations interleaved round-robin (the order rotating each
repetition) so machine noise hits all columns alike, after one unmeasured warm-up run:

1. Overhead: the churn workloads of bench/run.py (1 and 4 threads) unprofiled, sampled at the
   default rate (512 KiB, blocks of the rate or more recorded whole), at 512 KiB without exact
   blocks (MEMLENS_SAMPLE_EXACT_FROM=2^62: what recording large blocks whole costs), at 32 KiB
   (the default before issue 32), sampling's short path alone (a rate of 1 TiB: every
   allocation counts down and every free asks the filter, but nothing is sampled, so this is
   the floor that sampled blocks add to) and fully traced.
2. Threads: churn with 1, 2, 4 and 8 threads (the same total work), unprofiled and sampled at
   the default rate. A lock shared by all threads would make the slowdown grow with the thread
   count; the figure of merit is slowdown(8 threads) / slowdown(1 thread), which should stay
   under 1.2.
3. Large heaps: churn of small blocks beside 0, 1 and 4 GiB kept live (workloads/big_heap.cc),
   unprofiled and sampled at the default rate: every free asks the filter of sampled blocks,
   whose bits fill as more sampled blocks stay live unless it grows with them. The ratio is
   of the churn phase's own wall time (the program times it).

`--baseline-build-dir DIR` adds the sampled runs of another build at 512 KiB and at 32 KiB
(before/after, in the same rounds) to every table.

The choice of exact_from (the size from which blocks are recorded whole) is a matter of the
model alone (records per byte against the error of an estimate), printed as its own table: see
threshold_table.

Slowdowns are medians of per-repetition ratios to the unprofiled run of the same repetition,
both in wall time and in CPU time (user + system of the whole process, all threads: on a busy
machine it does not count the time spent waiting for a core). Writes docs/benchmarks-sampling.md
and prints it. Stdlib only; needs g++ and a built memlens (see bench/README.md).
"""
import argparse
import datetime
import math
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path

from harness import run_with_cpu, tail
from run import ITERATIONS, RESULTS, ROOT, build

DEFAULT = "sampled 512 KiB (default)"
NO_EXACT = "sampled 512 KiB, no exact blocks"
RATE_KIB = {DEFAULT: 512, NO_EXACT: 512, "sampled 32 KiB": 32}
CONFIGS = {  # name -> memlens run options (None: unprofiled)
    "unprofiled": None,
    DEFAULT: ["--sample"],
    NO_EXACT: ["--sample"],
    "sampled 32 KiB": ["--sample-rate", "32K"],
    "short path only (1 TiB)": ["--sample-rate", "1T"],
    "full tracing": [],
}
CONFIG_ENV = {NO_EXACT: {"MEMLENS_SAMPLE_EXACT_FROM": str(1 << 62)}}
THREADS = [1, 2, 4, 8]
HEAPS_MIB = [0, 1024, 4096]
# The error column: the relative standard error of an estimate over 75 MB of small blocks.
ACCURACY_BYTES = 75_000_000
BASELINES = {"baseline build, 512 KiB": ["--sample-rate", "512K"],
             "baseline build, 32 KiB": ["--sample-rate", "32K"]}


def one_run(memlens, options, command, log, capture, env=None):
    cmd = command if options is None else (
        [str(memlens), "run", "-o", str(capture)] + options + ["--"] + command)
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        rc, wall, cpu, _ = run_with_cpu(cmd, log)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    text = Path(log).read_text(errors="replace")
    if capture.exists():
        capture.unlink()
    if rc != 0 or not re.search(r"allocs=\d+ frees=\d+", text):
        return {"error": f"rc={rc}: {tail(text)}"}
    result = {"wall": wall, "cpu": cpu}
    phase = re.search(r"churn_s=([0-9.]+)", text)
    if phase:
        result["churn"] = float(phase[1])
    return result


def measure(memlens, jobs, runs):
    """jobs: {(workload, config): (options, command)} where options may be (binary, options)
    for another build; returns {(workload, config): [results]}."""
    keys = list(jobs)
    results = {k: [] for k in keys}
    for key in {k[0]: k for k in keys}.values():  # one warm-up per workload
        run_with_cpu(jobs[key][1], RESULTS / "sampling.warmup.log")
    for rep in range(runs):
        order = keys[rep % len(keys):] + keys[:rep % len(keys)]
        for key in order:
            options, command = jobs[key]
            binary = memlens
            if isinstance(options, tuple):
                binary, options = options
            r = one_run(binary, options, command, RESULTS / "sampling.log",
                        RESULTS / "sampling.mlens", CONFIG_ENV.get(key[1]))
            results[key].append(r)
            shown = r.get("error") or f"{r['wall']:.3f} s wall, {r['cpu']:.3f} s CPU"
            print(f"[{rep + 1}/{runs}] {key[0]:10} {key[1]:32} {shown}", flush=True)
    return results


def slowdown(results, workload, config, metric):
    base, runs = results[(workload, "unprofiled")], results[(workload, config)]
    ratios = [r[metric] / b[metric] for r, b in zip(runs, base) if metric in r and metric in b]
    return statistics.median(ratios) if ratios else None


def fastest_ratio(results, workload, config):
    """The fastest wall time over the fastest unprofiled one: interference only ever slows a run
    down, so the fastest runs are the least disturbed, a check on the medians."""
    base = [r["wall"] for r in results[(workload, "unprofiled")] if "wall" in r]
    runs = [r["wall"] for r in results[(workload, config)] if "wall" in r]
    return min(runs) / min(base) if runs and base else None


def threshold_table(rate=512 * 1024):
    """The model's trade for exact_from at `rate`, on blocks of log-uniform sizes from 1 KiB to
    8 MiB: recorded blocks per GiB allocated (the cost: each is a stack unwound and an event
    written) and the relative standard error of a 1 GiB figure of such blocks."""
    sizes = [1024 * 8192 ** (i / 1999) for i in range(2000)]  # 1 KiB..8 MiB, equal counts
    total = sum(sizes)
    rows = []
    for label, exact_from in (("rate / 4", rate / 4), ("rate / 2", rate / 2), ("rate", rate),
                              ("2 x rate", 2 * rate), ("4 x rate", 4 * rate), ("none", math.inf)):
        p = [1.0 if s >= exact_from else -math.expm1(-s / rate) for s in sizes]
        records = sum(p) / total * (1 << 30)
        variance = sum(s * s * (1 - q) / q for s, q in zip(sizes, p)) / total * (1 << 30)
        worst = 1 / -math.expm1(-exact_from / rate)  # blocks of exact_from bytes: p=1, was this
        rows.append(f"| {label} | {records:,.0f} | {100 * math.sqrt(variance) / (1 << 30):.2f}% | "
                    f"{worst:.2f} |")
    return rows


def fmt(value, spec=".2f"):
    return "–" if value is None else format(value, spec)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, help="repetitions (default 7, --quick 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, 1/10 of the work")
    p.add_argument("--build-dir", type=Path, default=ROOT / "build", help="memlens CMake build dir")
    p.add_argument("--baseline-build-dir", type=Path,
                   help="another build: its sampled runs beside this one's, in the same rounds")
    args = p.parse_args()
    runs = args.runs or (1 if args.quick else 7)
    iterations = ITERATIONS // 10 if args.quick else ITERATIONS
    memlens = args.build_dir.resolve() / "bin" / "memlens"
    configs = dict(CONFIGS)
    if args.baseline_build_dir:
        baseline = args.baseline_build_dir.resolve() / "bin" / "memlens"
        if not os.access(baseline, os.X_OK):
            sys.exit(f"memlens: {baseline} not found; build it first (bench/README.md)")
        configs.update({name: (baseline, o) for name, o in BASELINES.items()})
    if not os.access(memlens, os.X_OK):
        sys.exit(f"memlens: {memlens} not found; build it first (bench/README.md)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    churn = str(build("churn"))
    big_heap = str(build("big_heap"))

    overhead_jobs = {(f"churn_{t}t", c): (o, [churn, str(t), str(iterations)])
                     for t in (1, 4) for c, o in configs.items()}
    overhead = measure(memlens, overhead_jobs, runs)
    scaling_configs = [c for c in configs if c in ("unprofiled", DEFAULT, *BASELINES)]
    scaling_jobs = {(f"{t} threads", c): (configs[c], [churn, str(t), str(iterations)])
                    for t in THREADS for c in scaling_configs}
    scaling = measure(memlens, scaling_jobs, runs)
    heap_steps = str(5 * iterations)
    heap_jobs = {(f"{mib} MiB live", c): (configs[c], [big_heap, str(mib), heap_steps])
                 for mib in (HEAPS_MIB[:2] if args.quick else HEAPS_MIB) for c in scaling_configs}
    heaps = measure(memlens, heap_jobs, runs)

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    lines = [f"""# Benchmarks: sampling mode

Generated by `{' '.join(['python3', 'bench/sampling_bench.py'] + sys.argv[1:])}` on {datetime.date.today()}
(memlens at commit {commit}).
Machine: {len(os.sched_getaffinity(0))} CPUs (nproc), {cpu}, Linux {platform.release()};
load average at the end {os.getloadavg()[0]:.1f}. Runs per configuration: {runs};
{iterations:,} churn steps per run (one free and one allocation of 16..4096 bytes each,
bench/workloads/churn.cc), the same total work whatever the thread count.

Method: see the docstring of bench/sampling_bench.py. "Sampled 512 KiB (default)" is
`memlens run --sample` (one byte in 512 KiB, blocks of 512 KiB or more recorded whole,
docs/sampling.md); the baseline build's runs are `--sample-rate` 512K and 32K; seeds are random. Each cell is
the median over the repetitions of the ratio to the unprofiled run of the same repetition;
"fastest ÷ fastest" divides the fastest run of a configuration by the fastest unprofiled run.
This machine is shared: back-to-back runs of one command differ by up to a third, and medians
of 11 repetitions by up to 0.1 from one run of this script to the next, so read smaller
differences as noise.

## Overhead on the churn workloads

The last column is what a rate gives up: the relative standard error, sqrt(rate / bytes), of
an estimate over 75 MB of blocks much smaller than the rate (each figure now shows its own).
Churn's blocks are 16..4096 bytes: none is large enough to be recorded whole, so the two
512 KiB rows differ only by noise.

| workload | configuration | × unprofiled (wall) | × unprofiled (CPU) | fastest ÷ fastest (wall) | median wall s | median CPU s | std. error on 75 MB |
|---|---|---|---|---|---|---|---|"""]
    for (workload, config), results in overhead.items():
        failed = [r for r in results if "error" in r]
        if failed:
            lines.append(f"| {workload} | {config} | failed: {failed[0]['error']} | | | | | |")
            continue
        rate = RATE_KIB.get(config)
        error = f"{100 * (rate * 1024 / ACCURACY_BYTES) ** 0.5:.1f}%" if rate else ""
        lines.append(f"| {workload} | {config} | {fmt(slowdown(overhead, workload, config, 'wall'))} | "
                     f"{fmt(slowdown(overhead, workload, config, 'cpu'))} | "
                     f"{fmt(fastest_ratio(overhead, workload, config))} | "
                     f"{fmt(statistics.median(r['wall'] for r in results), '.3f')} | "
                     f"{fmt(statistics.median(r['cpu'] for r in results), '.3f')} | {error} |")
    lines.append("""
## Threads: no lock contention

Slowdown of `memlens run --sample` (512 KiB) over unprofiled at each thread count, and that slowdown
divided by the 1-thread one (the bar: under 1.2 at 8 threads).

| threads | × unprofiled (wall) | × unprofiled (CPU) | ÷ 1-thread slowdown (wall) | ÷ 1-thread slowdown (CPU) |
|---|---|---|---|---|""")
    for config in scaling_configs[1:]:
        one = {m: slowdown(scaling, "1 threads", config, m) for m in ("wall", "cpu")}
        for t in THREADS:
            s = {m: slowdown(scaling, f"{t} threads", config, m) for m in one}
            rel = {m: s[m] / one[m] if s[m] and one[m] else None for m in one}
            name = f"{t}" if config == DEFAULT else f"{t} ({config})"
            lines.append(f"| {name} | {fmt(s['wall'])} | {fmt(s['cpu'])} | {fmt(rel['wall'])} | "
                         f"{fmt(rel['cpu'])} |")
    lines.append(f"""
## Large heaps: the filter of sampled blocks

`bench/workloads/big_heap.cc`: {int(heap_steps):,} steps of freeing a block and allocating
16..255 bytes, beside a heap of 4 KiB blocks kept live (at 512 KiB about 2,000 sampled
blocks a GiB, at 32 KiB about 30,000, each setting a bit of the filter that every free asks). The ratio is of
the churn phase's own wall time, which the program measures: building a 4 GiB heap took from
1.4 to 6.4 s in back-to-back runs of the same command on this virtual machine (the first touch
of its memory), which would swamp the whole run's ratio.

| live heap | configuration | churn phase × unprofiled | median churn phase s | median unprofiled churn phase s |
|---|---|---|---|---|""")
    for (workload, config), results in heaps.items():
        if config == "unprofiled":
            continue
        failed = [r for r in results if "error" in r]
        if failed:
            lines.append(f"| {workload} | {config} | failed: {failed[0]['error']} | | |")
            continue
        base = [r["churn"] for r in heaps[(workload, "unprofiled")] if "churn" in r]
        lines.append(f"| {workload} | {config} | {fmt(slowdown(heaps, workload, config, 'churn'))} | "
                     f"{fmt(statistics.median(r['churn'] for r in results), '.3f')} | "
                     f"{fmt(statistics.median(base) if base else None, '.3f')} |")
    lines.append("""
## The threshold of exact blocks (the model)

Blocks of log-uniform sizes from 1 KiB to 8 MiB at 512 KiB: what each choice of exact_from
records per GiB allocated, the relative standard error of a 1 GiB figure of such blocks, and
the most it multiplies the records of a program whose blocks are all of one size (blocks of
exact_from bytes, recorded always instead of with probability 1 - exp(-exact_from / rate)).

| exact_from | blocks recorded per GiB | std. error on 1 GiB | most records × none |
|---|---|---|---|""")
    lines += threshold_table()
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "benchmarks-sampling.md").write_text(text)
    print("\n" + text)


if __name__ == "__main__":
    sys.exit(main())
