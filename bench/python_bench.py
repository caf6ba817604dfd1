#!/usr/bin/env python3
"""Python tracking, end to end: memlens side by side with tracemalloc and memray (stdlib only).

Runs every workload in bench/workloads/py_*.py unprofiled, under `memlens run`, under
tracemalloc (1 and 25 frames) and under memray in four modes, interleaved round-robin, then
times `memlens summary` and `memray summary` / `memray stats` on the capture of the same run.
Every configuration runs the same interpreter (this one's sys.executable, never a shim).
Writes docs/benchmarks-python.md and prints it. See bench/README.md.
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
RESULTS = BENCH / "results"  # gitignored: the memlens snapshot, captures, logs
WORKLOADS = ["py_objects", "py_numpy"]  # bench/workloads/NAME.py SCALE
MEMRAY = ["-m", "memray", "run", "-q", "-f"]  # quiet, overwrite; lz4-compresses at exit (default)
CONFIGS = {  # name -> (kind, arguments between the interpreter and the script)
    "unprofiled": (None, []),
    "memlens": ("memlens", []),
    "tracemalloc=1": (None, ["-X", "tracemalloc=1"]),
    "tracemalloc=25": (None, ["-X", "tracemalloc=25"]),
    "memray": ("memray", MEMRAY),
    "memray --native": ("memray", MEMRAY + ["--native"]),
    "memray --trace-python-allocators": ("memray", MEMRAY + ["--trace-python-allocators"]),
    "memray --native --trace-python-allocators":
        ("memray", MEMRAY + ["--native", "--trace-python-allocators"]),
}
BAR = "memray --native --trace-python-allocators"  # records what memlens records


def snapshot_memlens(build_dir):
    """Copies memlens, its agent and Python hooks to bench/results/memlens/{bin,lib}, so that a
    rebuild of the build tree during the run cannot change the tool under measurement (memlens
    finds the agent at ../lib from its executable). Returns the copied executable or None."""
    files = [build_dir / "bin" / "memlens", build_dir / "lib" / "libmemlens.so"]
    files += sorted((build_dir / "lib").glob("libmemlens_python*.so"))
    if not all(os.access(f, os.R_OK) for f in files):
        return None
    dest = RESULTS / "memlens"
    for _ in range(5):  # retry while a build is writing the files
        stamps = [(f.stat().st_size, f.stat().st_mtime_ns) for f in files]
        for f in files:
            (dest / f.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / f.parent.name / f.name)
        if stamps == [(f.stat().st_size, f.stat().st_mtime_ns) for f in files]:
            return dest / "bin" / "memlens"
        time.sleep(10)
    return None


def one_run(config, name, py, script, memlens, rep):
    """Runs the workload under config; returns a dict of measurements, or {"error": ...}."""
    kind, extra = CONFIGS[config]
    slug = re.sub(r"[^a-z0-9=]+", "_", config).strip("_")
    log, capture = RESULTS / f"{name}.{slug}.log", RESULTS / f"{name}.{slug}.{rep}.capture"
    capture.unlink(missing_ok=True)
    if kind == "memlens":
        cmd = [str(memlens), "run", "-o", str(capture), "--", py] + script
    else:
        cmd = [py] + extra + (["-o", str(capture)] if kind == "memray" else []) + script
    rc, wall, rss = run(cmd, log)
    text = log.read_text(errors="replace")
    found = re.search(r"checksum=(\S+)", text)
    if rc != 0 or not found:
        capture.unlink(missing_ok=True)
        return {"error": f"rc={rc}: {tail(text)}"}
    r = {"wall": wall, "rss": rss / 1024, "checksum": found[1]}
    if kind is None:
        return r
    if not capture.exists():
        return {"error": f"no capture at {capture}"}
    r["size"] = capture.stat().st_size
    if kind == "memlens":
        arc, r["analyze"], out, err = timed([str(memlens), "summary", str(capture)])
        try:
            totals = json.loads(timed([str(memlens), "summary", "--json", str(capture)])[2])
            r["allocs"] = totals["totals"]["allocations"]
            r["py_bytes"] = totals["totals"]["python_allocated_bytes"]
        except (ValueError, KeyError, TypeError):
            pass
    else:
        arc, r["analyze"], out, err = timed([py, "-m", "memray", "summary", str(capture)])
        src, r["stats"], sout, serr = timed([py, "-m", "memray", "stats", str(capture)])
        allocs = re.search(r"Total allocations:\s+(\d+)", sout)
        if src != 0 or not allocs:
            r["analyze_error"] = f"memray stats rc={src}: {tail(serr + sout)}"
        r["allocs"] = int(allocs[1]) if allocs else None
    if arc != 0:
        r["analyze_error"] = f"rc={arc}: {tail(err + out)}"
    if "analyze_error" not in r:  # else keep the capture to look at
        capture.unlink()
    return r


def median(results, key):
    values = [r[key] for r in results if r.get(key) is not None]
    return statistics.median(values) if values else None


def fmt(value, spec):
    return "–" if value is None else format(value, spec)


def ratios(results, by_config, config):
    """Median over repetitions of wall(config) / wall(unprofiled) of the same repetition."""
    base = by_config["unprofiled"]
    values = [r["wall"] / base[i]["wall"] for i, r in enumerate(results)
              if "wall" in r and i < len(base) and "wall" in base[i]]
    return statistics.median(values) if values else None


def table(all_results, skipped):
    rows = ["| workload | configuration | wall s | × unprofiled | peak RSS MiB | capture bytes | "
            "allocations recorded | Python-allocator bytes | summary s | memray stats s |",
            "|" + "---|" * 10]
    verdicts = []
    for name, by_config in all_results.items():
        for config in CONFIGS:
            results = by_config[config]
            ok = [r for r in results if "error" not in r]
            if config in skipped or not ok:
                why = skipped.get(config) or (f"failed, {results[0]['error']}" if results else "–")
                rows.append(f"| {name} | {config} | {why} |" + " |" * 7)
                continue
            errors = {r["analyze_error"] for r in ok if "analyze_error" in r}
            rows.append("| " + " | ".join([
                name, config + (f" ({len(ok)}/{len(results)} ok)" if len(ok) < len(results) else ""),
                fmt(median(ok, "wall"), ".3f"), fmt(ratios(results, by_config, config), ".2f"),
                fmt(median(ok, "rss"), ".1f"), fmt(median(ok, "size"), ",.0f"),
                fmt(median(ok, "allocs"), ",.0f"), fmt(median(ok, "py_bytes"), ",.0f"),
                fmt(median(ok, "analyze"), ".3f") if not errors else f"failed: {errors.pop()}",
                fmt(median(ok, "stats"), ".3f")]) + " |")
        ours, theirs = (ratios(by_config[c], by_config, c) for c in ("memlens", BAR))
        if ours is not None and theirs is not None:
            verdicts.append(f"- {name}: memlens {ours:.2f}× vs `{BAR}` {theirs:.2f}×: memlens is "
                            + ("**faster**" if ours < theirs else "**not faster**") + ".")
    return "\n".join(rows) + "\n\nThe bar (memlens slower than unprofiled by less than " \
        f"`{BAR}`):\n\n" + ("\n".join(verdicts) or "- not measured") + "\n"


def versions(py, memlens):
    code = ("import sys, importlib.metadata as m; print(sys.version.split()[0], "
            "m.version('memray'), m.version('numpy'))")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True).stdout.split()
    ml = subprocess.run([str(memlens), "--version"], capture_output=True, text=True).stdout.strip() \
        if memlens else "not built"
    return (out + ["?"] * 3)[:3] + [ml or "?"]


def header(args, py, memlens):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    python, memray, numpy, ml = versions(py, memlens)
    return f"""# Benchmarks: Python tracking, end to end

Generated by `{' '.join(['python3', 'bench/python_bench.py'] + sys.argv[1:])}` on \
{datetime.date.today()}.
Machine: {len(os.sched_getaffinity(0))} CPUs (nproc), {cpu}, Linux {platform.release()}.
Python {python} (`{py}`), memray {memray}, numpy {numpy}, memlens {ml}.
Runs per configuration: {args.runs}; workload scale {args.scale}.

Method. Each workload (bench/workloads/py_*.py, deterministic) runs under every configuration
with the same interpreter binary (resolved path, no pyenv shim) and prints a checksum that must
match the unprofiled run's. Within each repetition the configurations run round-robin, the
order rotating each repetition, so machine noise hits all columns alike; an unmeasured
unprofiled warm-up run comes first. Wall time is `time.perf_counter` around the whole command,
so it includes interpreter start-up and each tool's work at exit (memray lz4-compresses its
capture at exit by default; memlens's writer drains and closes its capture); "× unprofiled" is
the median of the per-repetition ratios, every other column a median over the runs. Peak RSS is
`/usr/bin/time -f %M`, the largest single process of the command. "Allocations recorded" is
`totals.allocations` of `memlens summary --json` and "Total allocations" of `memray stats`
(which counts reallocs as allocations); "Python-allocator bytes" is memlens's
`totals.python_allocated_bytes`. "summary s" times `memlens summary CAPTURE` and
`python -m memray summary CAPTURE` on the capture of the same run; "memray stats s" times
`python -m memray stats CAPTURE`. memlens runs from a copy of the build taken at the start.
"""


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--runs", type=int, help="repetitions per configuration (default 5, --quick 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, 1/10 of the work")
    p.add_argument("--only", choices=WORKLOADS, help="run one workload")
    p.add_argument("--build-dir", type=Path, default=ROOT / "build", help="memlens CMake build dir")
    p.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    args = p.parse_args()
    args.runs = args.runs or (1 if args.quick else 5)
    args.scale = 0.1 if args.quick else 1.0
    py = os.path.abspath(args.python)
    with open(py, "rb") as f:
        if f.read(2) == b"#!":
            sys.exit(f"{py} is a script (a pyenv shim?); pass the real interpreter with --python")
    RESULTS.mkdir(parents=True, exist_ok=True)
    names = [args.only] if args.only else WORKLOADS

    skipped = {}
    memlens = snapshot_memlens(args.build_dir.resolve())
    if not memlens:
        skipped["memlens"] = "not built"
        print(f"memlens: not found in {args.build_dir}; build it with `cmake -S {ROOT} -B "
              f"{args.build_dir} -G Ninja && cmake --build {args.build_dir}`. Rows skipped.")
    if subprocess.run([py, "-c", "import memray"], capture_output=True).returncode != 0:
        skipped.update({c: "not installed" for c in CONFIGS if c.startswith("memray")})
        print(f"memray: not installed for {py} (pip install memray); memray rows are skipped.")
    configs = [c for c in CONFIGS if c not in skipped]

    results = {n: {c: [] for c in CONFIGS} for n in names}
    scripts = {n: [str(BENCH / "workloads" / f"{n}.py"), str(args.scale)] for n in names}
    for n in names:
        run([py] + scripts[n], RESULTS / f"{n}.warmup.log")
    for rep in range(args.runs):
        for n in names:
            for config in configs[rep % len(configs):] + configs[:rep % len(configs)]:
                r = one_run(config, n, py, scripts[n], memlens, rep)
                results[n][config].append(r)
                summary = r.get("error") or f"{r['wall']:.3f} s" + (
                    f", summary {r['analyze']:.3f} s" if "analyze" in r else "")
                print(f"[{rep + 1}/{args.runs}] {n:10} {config:42} {summary}", flush=True)
        # the per-repetition ratio needs both runs; a checksum that differs is a failure
        for n in names:
            base = results[n]["unprofiled"][-1].get("checksum")
            for config in configs:
                r = results[n][config][-1]
                if "checksum" in r and base and r["checksum"] != base:
                    results[n][config][-1] = {"error": f"checksum {r['checksum']} != {base}"}

    text = header(args, py, memlens) + "\n" + table(results, skipped)
    (ROOT / "docs").mkdir(exist_ok=True)
    (ROOT / "docs" / "benchmarks-python.md").write_text(text)
    print("\n" + text)


if __name__ == "__main__":
    sys.exit(main())
