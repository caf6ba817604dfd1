#!/usr/bin/env python3
"""In-process tracking (issue 28): what a span costs when a program tracks itself.

    python3 bench/inprocess_bench.py                 # 7 rounds, full size: writes its section
                                                     # of docs/benchmarks.md (~5 min when quiet)
    python3 bench/inprocess_bench.py --quick         # 2 rounds, a quarter of the work, prints only
    python3 bench/inprocess_bench.py --python /work/cache/pythons/3.13/bin/python3.13 --no-write

Two measurements, each in fresh processes of the interpreter under test (PYTHONPATH=src/python,
MEMLENS_BUILD_DIR=--build-dir):

1. Start/stop: the per-call cost of starting and stopping an empty span, --calls times in one
   process (the first call, which loads the agent, timed apart): memlens.Tracker(path).start()
   and .stop(), beside tracemalloc.start(1)/stop() and entering/leaving memray.Tracker(path).
   Medians in microseconds.
2. Slowdown: the py_objects workload (bench/workloads/py_objects.py, as in bench/suite.py) run
   inside one span, timed from the span's start to the end of its stop (so memlens's stop,
   which waits until the capture is complete, and memray's, which writes its file, count), in
   each column: untracked, memlens.Tracker (native=True: Python's allocator and native memory),
   memlens.Tracker(native=False), tracemalloc.start(1), tracemalloc.start(25), memray.Tracker
   (default) and memray.Tracker(native_traces=True, trace_python_allocators=True) (the mode that
   records what memlens records). Each run is its own process: import, then an untimed warm-up
   of the workload at a tenth of its size (code specialised, arenas grown), then the timed span.
   Each round runs every column once, in an order rotating from round to round; a ratio is the
   median over rounds of the column's time over the untracked run's in the same round. Wall
   time (perf_counter) and CPU time (process_time: every thread of the process, so a tracker's
   writer thread counts). Every run must print the untracked run's checksum.

The bar (issue 28): memlens.Tracker below tracemalloc.start(1), while recording native memory
too. The machine's load average is printed and written with the table: on a shared machine the
ratios are noisy, so rerun on a quiet one. Stdlib only; memray (PyPI) where installed, its
columns saying "not installed" otherwise.
"""
import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "inprocess"  # gitignored: captures and logs
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench/inprocess_bench.py: begin -->", "<!-- bench/inprocess_bench.py: end -->"

# column -> what it runs around the span (the child builds it with span_context)
COLUMNS = {
    "untracked": "the workload alone",
    "memlens": "`memlens.Tracker(path)`: Python's allocator and native memory (GOT patching)",
    "memlens python-only": "`memlens.Tracker(path, native=False)`: Python's allocator only",
    "tracemalloc 1": "`tracemalloc.start(1)` ... `tracemalloc.stop()`",
    "tracemalloc 25": "`tracemalloc.start(25)` ... `tracemalloc.stop()`",
    "memray": "`with memray.Tracker(path)`: default mode (does not see Python's small-object "
              "allocator)",
    "memray native+py": "`with memray.Tracker(path, native_traces=True, "
                        "trace_python_allocators=True)`",
}
BAR = ("memlens", "tracemalloc 1")


# --- the child: one process, one measurement -------------------------------------------------

@contextlib.contextmanager
def _tracemalloc_span(frames):
    import tracemalloc
    tracemalloc.start(frames)
    try:
        yield
    finally:
        tracemalloc.stop()


def span_context(column, path):
    """A context manager that tracks its body as `column` does, writing to path."""
    if column == "untracked":
        return contextlib.nullcontext()
    if column.startswith("memlens"):
        import memlens
        return memlens.Tracker(str(path), native=(column == "memlens"))
    if column.startswith("tracemalloc"):
        return _tracemalloc_span(int(column.split()[1]))
    import memray
    if column == "memray":
        return memray.Tracker(str(path))
    return memray.Tracker(str(path), native_traces=True, trace_python_allocators=True)


def run_workload(py_objects, scale):
    """py_objects.main() at `scale`; returns what it prints (its checksum line)."""
    argv, sys.argv = sys.argv, ["py_objects.py", str(scale)]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            py_objects.main()
    finally:
        sys.argv = argv
    return out.getvalue().strip()


def child_span(column, scale, path):
    sys.path.insert(0, str(ROOT / "bench" / "workloads"))
    import py_objects
    if column != "untracked":  # the tracker's module imported outside the timing
        __import__(column.split()[0])
    run_workload(py_objects, scale / 10)
    wall, cpu = time.perf_counter(), time.process_time()
    with span_context(column, path):
        printed = run_workload(py_objects, scale)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    size = path.stat().st_size if path.exists() else None
    return {"wall": wall, "cpu": cpu, "printed": printed, "bytes": size}


def child_start_stop(column, calls, directory):
    """Per-call start and stop times (seconds) of an empty span, `calls` times, plus the first."""
    starts, stops = [], []
    for i in range(calls + 1):
        path = directory / f"span-{i}"
        context = span_context(column, path)
        t0 = time.perf_counter()
        context.__enter__()
        t1 = time.perf_counter()
        context.__exit__(None, None, None)
        t2 = time.perf_counter()
        starts.append(t1 - t0)
        stops.append(t2 - t1)
        for leftover in directory.glob(f"span-{i}*"):
            leftover.unlink()
    return {"first": [starts[0], stops[0]], "start": starts[1:], "stop": stops[1:]}


def child_main(argv):
    kind, column, value, where = argv
    if kind == "span":
        result = child_span(column, float(value), Path(where))
    else:
        result = child_start_stop(column, int(value), Path(where))
    print(json.dumps(result))


# --- the parent: rounds, medians, the table --------------------------------------------------

class Bench:
    def __init__(self, args):
        self.args = args
        self.python = str(Path(args.python).absolute())
        build = args.build_dir.resolve()
        self.memlens = build / "bin" / "memlens"
        self.env = dict(os.environ, PYTHONPATH=str(ROOT / "src" / "python"),
                        MEMLENS_BUILD_DIR=str(build))
        self.unavailable = {}
        if not self.has("memlens") or not (build / "lib" / "libmemlens.so").exists():
            self.unavailable["memlens"] = f"not built in {build}"
        if not self.has("memray"):
            self.unavailable["memray"] = f"not installed for {self.python}"
        self.columns = [c for c in args.columns.split(",")] if args.columns else list(COLUMNS)
        for column in self.columns:
            if column not in COLUMNS:
                sys.exit(f"unknown column {column!r}; the columns: {', '.join(COLUMNS)}")
        RESULTS.mkdir(parents=True, exist_ok=True)

    def has(self, module):
        code = f"import {module}" + ("; memlens.Tracker" if module == "memlens" else "")
        return subprocess.run([self.python, "-c", code], env=self.env,
                              capture_output=True).returncode == 0

    def why_not(self, column):
        return self.unavailable.get(column.split()[0])

    def child(self, *argv):
        proc = subprocess.run([self.python, str(Path(__file__).resolve()), "--child", *argv],
                              env=self.env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines() or [f"exit {proc.returncode}"]
            return {"error": lines[-1][:100]}
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def start_stop(self):
        """column -> {"start": median s, "stop": median s, "first": [start, stop]} or error."""
        out = {}
        for column in self.columns:
            if column == "untracked" or self.why_not(column):
                continue
            with tempfile.TemporaryDirectory(dir=RESULTS) as directory:
                result = self.child("startstop", column, str(self.args.calls), directory)
            if "error" not in result:
                result = {"start": statistics.median(result["start"]),
                          "stop": statistics.median(result["stop"]), "first": result["first"]}
            out[column] = result
            print(f"start/stop {column}: {result}", flush=True)
        return out

    def slowdown(self):
        """column -> list of per-round results ({"wall", "cpu", "printed", "bytes"} or error)."""
        runnable = [c for c in self.columns if not self.why_not(c)]
        if "untracked" not in runnable:
            runnable.insert(0, "untracked")
        rounds = {c: [] for c in runnable}
        for r in range(self.args.runs):
            order = runnable[r % len(runnable):] + runnable[:r % len(runnable)]
            for column in order:
                path = RESULTS / f"{column.replace(' ', '_')}-{r}.bin"
                for stale in RESULTS.glob(path.stem + ".*"):
                    stale.unlink()
                result = self.child("span", column, str(self.args.scale), str(path))
                if column.startswith("memlens") and "error" not in result:
                    result["recorded"] = self.recorded(path)
                rounds[column].append(result)
                shown = result.get("error") or (f"{result['wall']:.2f} s wall, "
                                                f"{result['cpu']:.2f} s CPU")
                print(f"round {r + 1}/{self.args.runs} {column}: {shown}", flush=True)
        return rounds


    def recorded(self, capture):
        """(allocations, native bytes) that memlens recorded in the span: `memlens summary`'s
        totals, native being what did not come through Python's allocator."""
        proc = subprocess.run([str(self.memlens), "summary", str(capture), "--json"],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        totals = json.loads(proc.stdout)["totals"]
        return totals["allocations"], totals["allocated_bytes"] - totals["python_allocated_bytes"]


def ratios(rounds, column, key):
    """The per-round ratios of column over untracked, for rounds where both ran and printed the
    same; and the number of rounds that failed."""
    values, failed = [], 0
    for mine, base in zip(rounds[column], rounds["untracked"]):
        if "error" in mine or "error" in base or mine["printed"] != base["printed"]:
            failed += 1
        else:
            values.append(mine[key] / base[key])
    return values, failed


def render(bench, start_stop, rounds, load, started, minutes):
    args = bench.args
    version = subprocess.run([bench.python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    memray_version = subprocess.run(
        [bench.python, "-c", "import importlib.metadata as m; print(m.version('memray'))"],
        capture_output=True, text=True).stdout.strip() or "not installed"
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    lines = [BEGIN, "## In-process tracking (issue 28)", "",
             f"Generated by `python3 bench/inprocess_bench.py --runs {args.runs} --scale "
             f"{args.scale} --calls {args.calls}` on {started} in {minutes:.0f} min "
             f"(commit {commit}); bench/inprocess_bench.py's docstring states the method. "
             f"Machine: {os.cpu_count()} CPUs, {cpu}; load average {load[0]:.1f} at the start "
             f"and {load[1]:.1f} at the end. Python {version} (`{bench.python}`), memray "
             f"{memray_version}.", ""]
    lines += ["### Start and stop of an empty span", "",
              f"Median of {args.calls} calls in one process, in microseconds; the first call "
              "(which loads the agent for memlens) apart.", "",
              "| tracker | start µs | stop µs | first start µs | first stop µs |",
              "|---|---|---|---|---|"]
    for column, result in start_stop.items():
        if "error" in result:
            lines.append(f"| {column} | **failed**: {result['error']} | | | |")
        else:
            lines.append(f"| {column} | {result['start'] * 1e6:.0f} | {result['stop'] * 1e6:.0f} | "
                         f"{result['first'][0] * 1e6:.0f} | {result['first'][1] * 1e6:.0f} |")
    base = rounds["untracked"]
    ok = [b for b in base if "error" not in b]
    lines += ["", "### Slowdown of a span of py_objects", "",
              f"Median over {args.runs} paired rounds of the ratio to the untracked span in the "
              f"same round; the untracked span took {statistics.median(b['wall'] for b in ok):.2f} "
              f"s wall, {statistics.median(b['cpu'] for b in ok):.2f} s CPU (medians)."
              if ok else "The untracked runs failed.", "",
              "| tracker | wall × untracked | CPU × untracked | capture MiB | allocations "
              "recorded | native MiB recorded | what it runs |",
              "|---|---|---|---|---|---|---|"]
    medians = {}
    for column in bench.columns:
        if column == "untracked":
            continue
        if bench.why_not(column):
            lines.append(f"| {column} | {bench.why_not(column)} | | | | | {COLUMNS[column]} |")
            continue
        wall, failed = ratios(rounds, column, "wall")
        cpu, _ = ratios(rounds, column, "cpu")
        sizes = [r["bytes"] for r in rounds[column] if r.get("bytes")]
        size = f"{statistics.median(sizes) / 2**20:.1f}" if sizes else "–"
        if not wall:
            error = next((r["error"] for r in rounds[column] if "error" in r), "wrong output")
            lines.append(f"| {column} | **failed** ({failed}/{args.runs}): {error} | | | | | "
                         f"{COLUMNS[column]} |")
            continue
        medians[column] = (statistics.median(wall), statistics.median(cpu))
        note = f" ({failed} of {args.runs} failed)" if failed else ""
        recorded = [r["recorded"] for r in rounds[column] if r.get("recorded")]
        counts = (f"{statistics.median(a for a, _ in recorded) / 1e6:.2f} M | "
                  f"{statistics.median(n for _, n in recorded) / 2**20:.1f}" if recorded
                  else "– | –")
        lines.append(f"| {column} | {medians[column][0]:.2f}{note} | {medians[column][1]:.2f} | "
                     f"{size} | {counts} | {COLUMNS[column]} |")
    lines += ["", "Allocations and native bytes recorded: memlens's (`memlens summary --json` of "
              "the span's capture: `totals.allocations`, and `allocated_bytes` less "
              "`python_allocated_bytes`); – for the others.", "",
              "The bar: memlens.Tracker (native memory too) below tracemalloc.start(1):"]
    if all(c in medians for c in BAR):
        (mw, mc), (tw, tc) = medians[BAR[0]], medians[BAR[1]]
        verdict = lambda a, b: "**met**" if a < b else "**not met**"
        lines.append(f"wall {mw:.2f}× against {tw:.2f}×: {verdict(mw, tw)}; CPU {mc:.2f}× "
                     f"against {tc:.2f}×: {verdict(mc, tc)}.")
    else:
        lines.append("not measured (a column failed or did not run).")
    lines += ["", END]
    return "\n".join(lines) + "\n"


def write_section(section, path):
    """Replaces this script's section of path (between its markers), or appends it."""
    text = path.read_text() if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="interpreter under test")
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build")
    parser.add_argument("--runs", type=int, default=7, help="paired rounds (default 7)")
    parser.add_argument("--scale", type=float, default=1.0, help="py_objects' size (1.0: ~9 M "
                        "allocations, as in bench/suite.py)")
    parser.add_argument("--calls", type=int, default=200, help="start/stop calls (default 200)")
    parser.add_argument("--columns", help="comma-separated, from: " + ", ".join(COLUMNS))
    parser.add_argument("--quick", action="store_true", help="2 rounds, scale 0.25, 50 calls; "
                        "prints the section without writing it")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--output", type=Path, default=DOC)
    args = parser.parse_args()
    if args.quick:
        args.runs, args.scale, args.calls, args.no_write = 2, 0.25, 50, True
    bench = Bench(args)
    for column, why in bench.unavailable.items():
        print(f"{column}: {why}")
    started, load_before, t0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), \
        os.getloadavg()[0], time.time()
    start_stop = bench.start_stop()
    rounds = bench.slowdown()
    section = render(bench, start_stop, rounds, (load_before, os.getloadavg()[0]), started,
                     (time.time() - t0) / 60)
    print(section)
    if not args.no_write:
        write_section(section, args.output)
        print(f"written to {args.output}")


if __name__ == "__main__":
    main()
