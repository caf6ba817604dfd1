#!/usr/bin/env python3
"""The benchmark suite: every workload under every profiler that applies, side by side.

One command regenerates docs/benchmarks.md:

    python3 bench/suite.py                      # 5 rounds, the full sizes (15-20 minutes)
    python3 bench/suite.py --quick              # 1 round, 1/10 of the work: a smoke run
    python3 bench/suite.py --only churn_1t,black --columns memlens,heaptrack --runs 7
    python3 bench/suite.py --interpreters PY311,PY313,PY313T --only py_objects,black \
        --columns "memlens,memlens sampled,memray native+py,tracemalloc" --output docs/benchmarks.md

Workloads: native allocation churn on 1 and 4 threads, deep C++ call stacks, 100,000 distinct
call stacks, a pure-Python object-heavy script, a numpy script, and black (from PyPI) formatting
a module of the standard library. Columns: unprofiled, memlens full tracing, memlens sampled at its default rate,
heaptrack, memray (default, and --native --trace-python-allocators), tracemalloc and Scalene,
each where it applies. Paired runs: each round runs every column of a workload back to back
(the order rotating from round to round), so machine noise hits all columns alike, and every
ratio is the median over rounds of the ratio to the unprofiled run of the same round. Each
tool's analyzer is timed on the capture of its own run in that round.

A run with --only, --columns or --quick writes bench/results/benchmarks.md instead of
docs/benchmarks.md, unless --output says otherwise. With --interpreters, each Python workload is
a row per interpreter (all in the same rounds), and the run writes the output file's "Python
interpreters" section only, in place of the one there; a full run keeps that section. Stdlib
only; see bench/README.md for what it needs (the setup step pip-installs the missing Python
peers into the interpreter under test, never into those given with --interpreters).
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import run_with_cpu, tail, timed
import suite_report

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"  # gitignored: binaries, the memlens copy, captures, logs
ITERATIONS = 4_000_000  # native workloads: steps (churn) or allocations (deep_stacks)
PY_PACKAGES = ["memray", "numpy", "black", "scalene"]  # PyPI names, also their module names
MEMRAY = ["-m", "memray", "run", "-q", "-f"]  # quiet, overwrite; lz4-compresses at exit

# name -> (kind, what it is); workload_argv makes the command line
WORKLOADS = {
    "churn_1t": ("native", "4 M steps on one thread, each a free and a malloc/calloc/new of "
                 "16..4096 bytes from call sites 5..15 frames deep (workloads/churn.cc)"),
    "churn_4t": ("native", "the same 4 M steps split over 4 threads (workloads/churn.cc)"),
    "deep_stacks": ("native", "4 M `new[]` made on the way down recursions 50..200 frames "
                    "deep, each freeing the oldest of a 4096-block window "
                    "(workloads/deep_stacks.cc)"),
    "many_stacks": ("native", "2 M mallocs at the bottom of 18-deep recursions whose path "
                    "gives 100,000 distinct stacks, the live set growing then shrinking "
                    "(workloads/many_stacks.c, `cc -O0 -fno-omit-frame-pointer -fno-inline`)"),
    "py_objects": ("python", "pure Python, pymalloc-heavy records pipeline, about 9 M "
                   "allocations (workloads/py_objects.py)"),
    "py_numpy": ("python", "numpy arrays of 1e5..1e6 float64 with temporaries, slices, "
                 "concatenation (workloads/py_numpy.py)"),
    "black": ("python", "black (PyPI, compiled with mypyc) printing the diff that formats "
              "the standard library's difflib.py (2,056 lines; textwrap.py with --quick)"),
}
# native workload -> (source in bench/workloads, arguments before the count, count at full size)
NATIVE_SOURCES = {"churn_1t": ("churn.cc", ["1"], ITERATIONS),
                  "churn_4t": ("churn.cc", ["4"], ITERATIONS),
                  "deep_stacks": ("deep_stacks.cc", ["1"], ITERATIONS),
                  "many_stacks": ("many_stacks.c", ["100000"], ITERATIONS // 2)}

# name -> (which workload kinds it applies to, what it runs)
COLUMNS = {
    "unprofiled": ({"native", "python"}, "the workload alone"),
    "memlens": ({"native", "python"}, "`memlens run -o CAPTURE --`: full tracing"),
    "memlens sampled": ({"native", "python"}, "`memlens run --sample`: sampling at the "
                        "default rate"),
    "memlens no index": ({"native", "python"}, "`memlens run --no-index`: full tracing, "
                         "without indexing the capture while the program runs"),
    "memlens python-only": ({"python"}, "`memlens run --python-stacks`: full tracing, Python "
                            "lines only (no native unwinding)"),
    "memlens baseline": ({"native", "python"}, "`memlens run` of the build given with "
                         "--baseline-build-dir: before/after in the same rounds"),
    "memlens sampled baseline": ({"native", "python"}, "`memlens run --sample` of the build "
                                 "given with --baseline-build-dir"),
    "heaptrack": ({"native", "python"}, "`heaptrack -o BASE` (Debian's; records malloc & co., "
                  "not Python's own allocator)"),
    "memray": ({"python"}, "`python -m memray run`, default mode (does not record Python's "
               "small-object allocator)"),
    "memray native+py": ({"python"}, "`python -m memray run --native "
                         "--trace-python-allocators`: the mode that records what memlens does"),
    "tracemalloc": ({"python"}, "`python -X tracemalloc=1` (one frame, its cheapest setting)"),
    "scalene": ({"python"}, "`python -m scalene run --memory` (PyPI; samples allocations, "
                "profiles CPU too)"),
}


class Interpreter:
    """One Python under test: its tag ("3.13", "3.13t" for a free-threaded build), the peers and
    packages importable by it with their versions, and which columns and workloads cannot run
    under it and why."""

    def __init__(self, path, install, memlens):
        self.py = os.path.abspath(path)
        with open(self.py, "rb") as f:
            if f.read(2) == b"#!":
                sys.exit(f"{self.py} is a script (a pyenv shim?); pass the interpreter itself")
        self.tag = subprocess.run(
            [self.py, "-I", "-S", "-c", "import sys, sysconfig; print('%d.%d%s' % (*sys."
             "version_info[:2], 't' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"],
            capture_output=True, text=True).stdout.strip()
        if not self.tag:
            sys.exit(f"{self.py} does not run as a Python interpreter")
        self.unavailable = {}  # column -> why it cannot run under this interpreter
        self.missing_workloads = {}  # workload -> why it cannot run under this interpreter
        self.modules = self.python_modules(install)
        for column, module in (("memray", "memray"), ("memray native+py", "memray"),
                               ("scalene", "scalene")):
            if module not in self.modules:
                self.unavailable[column] = f"not installed for {self.tag}"
        for name, module in (("py_numpy", "numpy"), ("black", "black")):
            if module not in self.modules:
                self.missing_workloads[name] = f"{module} not installed for {self.tag}"
        # memlens records Python frames only where it has this interpreter's hooks; without
        # them it would record native allocations only, a figure not comparable with the peers.
        if memlens and not (memlens.parent.parent / "lib" /
                            f"libmemlens_python{self.tag}.so").exists():
            for column in ("memlens", "memlens sampled", "memlens no index",
                           "memlens python-only"):
                self.unavailable[column] = f"no hooks for {self.tag} in this build"

    def python_modules(self, install):
        """The peers and packages importable by this interpreter -> their versions (black's
        marked when it is not the mypyc-compiled build); installs the missing ones with pip
        first if told to."""
        def versions():
            code = ("import importlib.metadata as m, importlib.util as u, json\nout = {}\n"
                    "for n in %r:\n try: out[n] = m.version(n)\n except m.PackageNotFoundError:"
                    " pass\nif 'black' in out and not u.find_spec('black').origin.endswith("
                    "'.so'):\n out['black'] += ' (pure Python, not mypyc-compiled)'\n"
                    "print(json.dumps(out))" % PY_PACKAGES)
            out = subprocess.run([self.py, "-c", code], capture_output=True, text=True).stdout
            return json.loads(out or "{}")
        found = versions()
        missing = [m for m in PY_PACKAGES if m not in found]
        if missing and install:
            print(f"setup: {self.py} -m pip install {' '.join(missing)}", flush=True)
            subprocess.run([self.py, "-m", "pip", "install", "-q"] + missing)
            found = versions()
        return found


class Case:
    """One row of the tables: a workload, and for a Python workload the interpreter it runs
    under (its tag in the row's label when the suite measures several)."""

    def __init__(self, setup, name, interpreter=None):
        self.name, self.interpreter = name, interpreter
        several = len(setup.interpreters) > 1
        self.label = f"{name} ({interpreter.tag})" if interpreter and several else name
        self.unavailable = {**setup.unavailable, **(interpreter.unavailable if interpreter
                                                    else {})}
        self.missing = (setup.missing_workloads.get(name) or
                        (interpreter.missing_workloads.get(name) if interpreter else None))
        self.py = interpreter.py if interpreter else None


class Setup:
    """What this machine has: tools, versions, the interpreters, which columns cannot run and
    why."""

    def __init__(self, args):
        self.args = args
        self.scale = 0.1 if args.quick else 1.0
        self.unavailable = {}  # column -> why it cannot run here
        self.missing_workloads = {}  # workload -> why it cannot run here
        RESULTS.mkdir(parents=True, exist_ok=True)
        # At the start: the tree may move on while the rounds run (the memlens measured is
        # the copy taken here).
        self.commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always",
                                      "--dirty"], capture_output=True, text=True).stdout.strip()
        self.memlens = snapshot_memlens(args.build_dir.resolve(), RESULTS / "memlens")
        if not self.memlens:
            for column in ("memlens", "memlens no index", "memlens python-only"):
                self.unavailable[column] = "not built"
            print(f"memlens: not found in {args.build_dir}; build it (bench/README.md).")
        self.baseline = None
        if args.baseline_build_dir:
            self.baseline = snapshot_memlens(args.baseline_build_dir.resolve(),
                                             RESULTS / "memlens-baseline")
            if not self.baseline:
                self.unavailable["memlens baseline"] = "not built"
        else:
            self.unavailable["memlens baseline"] = "not asked for"
        self.sample_options = sample_options(self.memlens) if self.memlens else None
        if not self.sample_options:
            self.unavailable["memlens sampled"] = "n/a (not built)"
        self.baseline_sample_options = sample_options(self.baseline) if self.baseline else None
        if not self.baseline_sample_options:
            self.unavailable["memlens sampled baseline"] = self.unavailable.get(
                "memlens baseline", "n/a (not built)")
        if not shutil.which("heaptrack") or not shutil.which("heaptrack_print"):
            self.unavailable["heaptrack"] = "not installed"
        # --interpreters are never pip-installed into: the cache of built interpreters is
        # shared; a venv of one (python -m venv) is the place for a missing peer.
        self.interpreters = [Interpreter(p, not args.no_install and not args.interpreters,
                                         self.memlens)
                             for p in (args.interpreters or [args.python])]
        for name, (source, _, _) in NATIVE_SOURCES.items():
            if not (BENCH / "workloads" / source).exists():
                self.missing_workloads[name] = f"workloads/{source} not in this tree"

    def cases(self, names):
        """The rows: each native workload once, each Python one under every interpreter."""
        return [Case(self, n, None if WORKLOADS[n][0] == "native" else i)
                for n in names for i in ([None] if WORKLOADS[n][0] == "native"
                                         else self.interpreters)]

    def columns_for(self, case):
        kind = WORKLOADS[case.name][0]
        return [c for c in self.args.columns if kind in COLUMNS[c][0]]


def snapshot_memlens(build_dir, dest):
    """Copies memlens, its agent and its Python hooks to DEST/{bin,lib}, so that a rebuild of
    the build tree during the run cannot change the tool under measurement (memlens finds the
    agent at ../lib from its executable). Returns the copied executable or None."""
    files = [build_dir / "bin" / "memlens", build_dir / "lib" / "libmemlens.so"]
    files += sorted((build_dir / "lib").glob("libmemlens_python*.so"))
    if not all(os.access(f, os.R_OK) for f in files):
        return None
    for _ in range(5):  # retry while a build is writing the files
        stamps = [(f.stat().st_size, f.stat().st_mtime_ns) for f in files]
        for f in files:
            (dest / f.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / f.parent.name / f.name)
        if stamps == [(f.stat().st_size, f.stat().st_mtime_ns) for f in files]:
            return dest / "bin" / "memlens"
        time.sleep(10)
    return None


def sample_options(memlens):
    """The `memlens run` options that sample at the default rate, read from its --help; None
    when this build has no sampling mode."""
    text = subprocess.run([str(memlens), "run", "--help"], capture_output=True,
                          text=True).stdout
    if re.search(r"--sample\b(?!-)", text):
        return ["--sample"]
    default = re.search(r"--sample-rate[^\n]*(?:\n[^-\n][^\n]*)*?default[^0-9]*(\d+[KMG]?)", text)
    return ["--sample-rate", default[1]] if default else None


def build_native(source):
    """Builds bench/workloads/SOURCE (a name without suffix is a .cc) unless up to date."""
    src = BENCH / "workloads" / (source if "." in source else f"{source}.cc")
    exe = RESULTS / "bin" / src.stem
    if not exe.exists() or exe.stat().st_mtime < src.stat().st_mtime:
        exe.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".c":  # keep every call a frame: the stacks are the point
            cmd = ["cc", "-O0", "-g", "-fno-omit-frame-pointer", "-fno-inline"]
        else:
            cmd = ["g++", "-O2", "-g", "-std=c++17", "-pthread"]
        cmd += [str(src), "-o", str(exe)]
        print("build:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    return exe


def workload_argv(setup, case):
    """The workload's command: the whole command line for a native workload, the arguments
    after the interpreter for a Python one."""
    name = case.name
    if name in NATIVE_SOURCES:
        source, extra, count = NATIVE_SOURCES[name]
        return [str(build_native(source))] + extra + [str(int(count * setup.scale))]
    if name == "black":
        # The first interpreter's file for every interpreter: the same work in every row.
        stdlib = subprocess.run([setup.interpreters[0].py, "-c", "import sysconfig; print("
                                 "sysconfig.get_paths()['stdlib'])"], capture_output=True,
                                text=True)
        module = "textwrap.py" if setup.args.quick else "difflib.py"
        # A copy without the .py suffix: Scalene takes the first *.py argument for the script
        # to run. Black formats a file named on its command line whatever its suffix.
        source = RESULTS / f"{module}.txt"
        shutil.copyfile(Path(stdlib.stdout.strip()) / module, source)
        black = Path(case.py).parent / "black"  # the console script pip installed
        # --diff: prints the change and never reads or writes black's cache
        return [str(black), "--diff", "--quiet", str(source)]
    return [str(BENCH / "workloads" / f"{name}.py"), str(setup.scale)]


def output_token(name, text):
    """What the workload printed that every column must reproduce, and the events it counted
    itself (native workloads only); None when it did not finish."""
    if name in NATIVE_SOURCES:
        found = re.search(r"allocs=(\d+) frees=(\d+) events=(\d+) vmhwm_kib=\d+", text)
        return (f"allocs={found[1]} frees={found[2]}", int(found[3])) if found else None
    if name == "black":  # the diff; its header lines carry timestamps, so count lines
        lines = re.findall(r"^[-+@].*$", text, re.M)
        return (f"diff lines={len(lines)}", None) if lines else None
    found = re.search(r"checksum=(\S+)", text)
    return (found[1], None) if found else None


def target_peak_rss(text):
    """The peak RSS in KiB that the target printed about itself (VmHWM: the native workloads
    print it, the Python ones run under workloads/peak_rss.py), or None."""
    found = re.search(r"vmhwm_kib=(\d+)", text)
    return int(found[1]) if found else None


# The columns whose Python workloads run under workloads/peak_rss.py, which prints the
# target's own peak RSS. memray and Scalene take the script to run themselves (Scalene
# profiles only the script named), so they run it as it is, and have no such figure.
PEAK_RSS_WRAPPED = ("unprofiled", "memlens", "memlens sampled", "memlens no index",
                    "memlens baseline", "memlens sampled baseline", "heaptrack", "tracemalloc")


def command(setup, column, case, argv, capture):
    """The command line of CASE's workload under COLUMN, writing its capture to CAPTURE."""
    py = case.py
    if case.name not in NATIVE_SOURCES and column in PEAK_RSS_WRAPPED:
        argv = [str(BENCH / "workloads" / "peak_rss.py")] + argv
    target = argv if case.name in NATIVE_SOURCES else [py] + argv
    if column == "unprofiled":
        return target
    if column.startswith("memlens"):
        baseline = column.endswith("baseline")
        memlens = setup.baseline if baseline else setup.memlens
        options = ((setup.baseline_sample_options if baseline else setup.sample_options)
                   if "sampled" in column else [])
        options = options + (["--no-index"] if column == "memlens no index" else [])
        options = options + (["--python-stacks"] if column == "memlens python-only" else [])
        return [str(memlens), "run", "-o", str(capture)] + options + ["--"] + target
    if column == "heaptrack":
        return ["heaptrack", "-o", str(capture)] + target
    if column == "memray":
        return [py] + MEMRAY + ["-o", str(capture)] + argv
    if column == "memray native+py":
        return [py] + MEMRAY + ["--native", "--trace-python-allocators",
                                      "-o", str(capture)] + argv
    if column == "tracemalloc":
        return [py, "-X", "tracemalloc=1"] + argv
    if column == "scalene":  # program arguments go after ---; it insists on .json
        return [py, "-m", "scalene", "run", "--memory", "-o", f"{capture}.json", argv[0],
                "---"] + argv[1:]
    raise ValueError(column)


def describe_exit(rc):
    if rc < 0 or rc > 128:
        number = -rc if rc < 0 else rc - 128
        try:
            return f"crashed ({signal.Signals(number).name})"
        except ValueError:
            return f"killed (signal {number})"
    return f"failed (exit {rc})"


def first_error(text):
    """The first line that says why a run died (a helper process's C++ exception, a fault),
    which the tool's own closing words would otherwise hide."""
    found = re.search(r"^.*(what\(\)|terminate called|Segmentation fault|Aborted|Traceback|"
                      r"[Ee]rror).*$", text, re.M)
    return found[0] if found else None


def analyze(setup, column, case, capture, log_text):
    """Times the column's analyzer on CAPTURE; returns a dict of what it measured."""
    r = {}
    if column == "heaptrack":  # Debian's 1.4 writes BASE.zst (or .gz); it says where
        where = re.search(r'heaptrack output will be written to "(.+?)"', log_text)
        capture = Path(where[1]) if where else capture
    if not capture.exists():
        return {"analyze_error": "no capture"}
    r["size"] = capture.stat().st_size
    if column.startswith("memlens"):
        memlens = str(setup.baseline if column.endswith("baseline") else setup.memlens)
        rc, r["analyze"], out, err = timed([memlens, "summary", str(capture)])
        # memlens run indexed the capture as it was written, so that summary reads the index's
        # end; the same summary replaying every event is the analyzer's throughput.
        index = capture.with_name(capture.name + ".index")
        r["index_size"] = index.stat().st_size if index.exists() else 0
        replay = timed([memlens, "summary", str(capture)], env={**os.environ, "MEMLENS_INDEX": "0"})
        if replay[0] == 0:
            r["analyze_replay"] = replay[1]
        try:
            totals = json.loads(timed([memlens, "summary", "--json", str(capture)])[2])["totals"]
            r["events"], r["allocs"] = totals["events"], totals["allocations"]
        except (ValueError, KeyError, TypeError):
            pass
    elif column == "heaptrack":
        rc, r["analyze"], out, err = timed(["heaptrack_print", str(capture)])
        seen = re.search(r"calls to allocation functions: (\d+)", out)
        r["allocs"] = int(seen[1]) if seen else None
    elif column.startswith("memray"):
        rc, r["analyze"], out, err = timed([case.py, "-m", "memray", "stats", str(capture)])
        seen = re.search(r"Total allocations:\s+(\d+)", out)
        r["allocs"] = int(seen[1]) if seen else None
    if rc != 0:
        r["analyze_error"] = f"{describe_exit(rc)}: {tail(err + out)}"
        r.pop("analyze")
    else:
        capture.unlink()  # on failure, keep it to look at
        for index in RESULTS.glob(f"{capture.name}.index"):
            index.unlink()
    return r


def one_run(setup, column, case, argv, rnd):
    """Runs CASE under COLUMN once; returns a dict of measurements or {"error": ...}."""
    slug = re.sub(r"[^a-z0-9]+", "_", column)
    name = re.sub(r"[^a-z0-9_.]+", "_", case.label)
    log = RESULTS / f"{name}.{slug}.log"
    capture = RESULTS / f"{name}.{slug}.{rnd}.capture"  # heaptrack and Scalene add suffixes
    for old in RESULTS.glob(f"{capture.name}*"):
        old.unlink()
    rc, wall, cpu, rss = run_with_cpu(command(setup, column, case, argv, capture), log)
    text = log.read_text(errors="replace")
    token = output_token(case.name, text)
    if rc != 0 or token is None:
        for leftover in RESULTS.glob(f"{capture.name}*"):
            leftover.unlink()
        why = describe_exit(rc) if rc != 0 else "no result line"
        return {"error": why, "detail": tail(first_error(text) or text)}
    r = {"wall": wall, "cpu": cpu, "rss": rss / 1024, "token": token[0]}
    if target_peak_rss(text) is not None:
        r["target_rss"] = target_peak_rss(text) / 1024
    if token[1] is not None:
        r["program_events"] = token[1]
    if column in ("unprofiled", "tracemalloc", "scalene") or setup.args.no_analysis:
        for leftover in RESULTS.glob(f"{capture.name}*"):  # Scalene: a profile, no events
            leftover.unlink()
    else:
        r.update(analyze(setup, column, case, capture, text))
    return r


def measure(setup, cases):
    """All rounds: results[case label][column] is a list with one dict per round."""
    argvs = {c.label: workload_argv(setup, c) for c in cases}
    results = {c.label: {col: [] for col in setup.columns_for(c)} for c in cases}
    for c in cases:  # one unmeasured warm-up each: page cache, CPU frequency
        run_with_cpu(command(setup, "unprofiled", c, argvs[c.label], None),
                     RESULTS / f"{re.sub(r'[^a-z0-9_.]+', '_', c.label)}.warmup.log")
    width = max(len(c.label) for c in cases)
    for rnd in range(setup.args.runs):
        for case in cases:
            n = case.label
            columns = [c for c in results[n] if c not in case.unavailable]
            shift = rnd % len(columns)
            for column in columns[shift:] + columns[:shift]:
                r = one_run(setup, column, case, argvs[n], rnd)
                results[n][column].append(r)
                shown = (f"{r['error']}: {r['detail']}" if "error" in r else
                         f"{r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU" +
                         (f", analysis {r['analyze']:.2f} s" if "analyze" in r else "") +
                         (f", analysis {r['analyze_error']}" if "analyze_error" in r else ""))
                print(f"[{rnd + 1}/{setup.args.runs}] {n:{width}} {column:17} {shown}",
                      flush=True)
            base = results[n]["unprofiled"][-1].get("token")
            for column in columns:  # a column that computed something else did not work
                r = results[n][column][-1]
                if base and r.get("token") not in (None, base):
                    results[n][column][-1] = {"error": "wrong output",
                                              "detail": f"{r['token']} != {base}"}
    return results


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, help="rounds (default 5, --quick 1)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 1 round, 1/10 of the work (a smaller file for black)")
    p.add_argument("--only", help="comma-separated workloads: " + ",".join(WORKLOADS))
    p.add_argument("--columns", help="comma-separated columns besides unprofiled: " +
                   ",".join(c for c in COLUMNS if c != "unprofiled"))
    p.add_argument("--build-dir", type=Path, default=ROOT / "build",
                   help="the memlens CMake build directory (default: build)")
    p.add_argument("--baseline-build-dir", type=Path,
                   help="a second memlens build (e.g. of main) measured as column 'memlens "
                        "baseline' in the same rounds: before/after side by side")
    p.add_argument("--python", default=sys.executable,
                   help="the interpreter of the Python workloads (default: this one)")
    p.add_argument("--interpreters", type=lambda text: text.split(","),
                   help="comma-separated interpreters (executables) to run each Python "
                        "workload under, a row each, in the same rounds: writes the 'Python "
                        "interpreters' section of the output file in place of its own, and "
                        "installs nothing into them")
    p.add_argument("--no-analysis", action="store_true",
                   help="do not time the analyzers (their tables say –): shorter rounds")
    p.add_argument("--no-install", action="store_true",
                   help="do not pip-install missing Python peers (their columns say so)")
    p.add_argument("--output", type=Path, help="the Markdown file to write (default: "
                   "docs/benchmarks.md, or bench/results/benchmarks.md for a partial run)")
    args = p.parse_args()
    args.runs = args.runs or (1 if args.quick else 5)
    names = args.only.split(",") if args.only else list(WORKLOADS)
    columns = args.columns.split(",") if args.columns else [c for c in COLUMNS]
    for bad in [n for n in names if n not in WORKLOADS] + [c for c in columns
                                                          if c not in COLUMNS]:
        p.error(f"unknown workload or column '{bad}'")
    partial = args.only or args.columns or args.quick
    if not args.columns:  # columns only when asked for
        columns.remove("memlens no index")
        if not args.baseline_build_dir:
            columns.remove("memlens baseline")
            columns.remove("memlens sampled baseline")
    args.columns = ["unprofiled"] + [c for c in COLUMNS if c in columns and c != "unprofiled"]
    output = args.output or (RESULTS / "benchmarks.md" if partial else
                             ROOT / "docs" / "benchmarks.md")

    setup = Setup(args)
    cases = setup.cases(names)
    started = time.time()
    load_before = os.getloadavg()[0]
    results = measure(setup, [c for c in cases if not c.missing])
    render = suite_report.render_interpreters if args.interpreters else suite_report.render
    text = render(setup, cases, results, {
        "command": " ".join(["python3", "bench/suite.py"] + sys.argv[1:]),
        "minutes": (time.time() - started) / 60, "load": (load_before, os.getloadavg()[0]),
        "root": ROOT, "workloads": WORKLOADS, "columns": COLUMNS})
    output.parent.mkdir(parents=True, exist_ok=True)
    suite_report.write(output, text, section=bool(args.interpreters))
    print("\n" + text + f"\nwritten to {output}")


if __name__ == "__main__":
    sys.exit(main())
