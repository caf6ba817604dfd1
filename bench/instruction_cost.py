#!/usr/bin/env python3
"""Instructions and first-level cache misses per recorded event, by part: the hot path's cost in
numbers that do not move with the machine's noise (stdlib + valgrind's callgrind).

Wall-time ratios on a shared 2-core machine move by 0.05 or more between runs of the same
build, which hides any single change to the hot path smaller than that. Callgrind counts the
instructions each function executed, thread by thread, and simulates the first-level data
cache, so two builds can be compared exactly. It does not model the other core (the writer's
cache lines moving between cores), so it complements the timed benchmarks; it does not
replace them.

Runs a bench workload under callgrind unprofiled, sampled at the default rate (a fixed seed)
and fully traced, the agent preloaded directly (no `memlens run` process). Every count of the
writer thread goes to the writer, the C library's work for it included; each function's
counts on the program's threads go to one part:

  short path  the interposers and sampling's inline countdown and filter (every call pays it)
  sampling    the draw, the sampled-pointer set (insert, take, lock, filter counts)
  unwind      stack capture (CaptureStack, CommitStack, frame rules, libunwind)
  record      the full path's way in (MallocFull and the like: caller check, guard), and the
              ring: reserving, writing and publishing records
  program     the workload and the C library, minus the unprofiled run's count
  writer      the writer thread: draining, interning stacks, encoding, zstd (on another core)

and the table gives each part per recorded event (an allocation or a free; sampled: a sampled
block is two events), with the sum of the parts that run on the program's own thread.

    python3 bench/instruction_cost.py                        # churn_1t, this build
    python3 bench/instruction_cost.py --baseline-build-dir /tmp/main/build   # before/after
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (the workloads and their build)

PARTS = ["short path", "sampling", "unwind", "record", "program", "writer"]
ON_PROGRAM_THREAD = PARTS[:5]
WRITER_THREAD = re.compile(r"\bWriter::")  # the writer class runs on its own thread only
SAMPLING = re.compile(r"SampledPointers|SampleSlow|DrawDistance|RememberSampled|AdmitRelease|"
                      r"__ieee754_log|^log@")
UNWIND = re.compile(r"CaptureStack|CommitStack|FrameRule|RuleFor|FindFde|ParseCie|Execute|"
                    r"CaptureWithLibunwind|_dl_find_object|unw_|_ULx86_64")
AGENT = re.compile(r"(^|/)src/(agent|python)/")
ENTRY = re.compile(r"^(malloc|free|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|"
                   r"memalign|valloc|pvalloc|operator new|operator delete)\b")


def part_of(path, function):
    """The part of a function run on a program thread."""
    if SAMPLING.search(function):
        return "sampling"
    if UNWIND.search(function):
        return "unwind"
    # The agent's own lines, and a C++ header's lines inlined into it (its atomics)
    inlined_into_agent = path.startswith("/usr/include/c++/") and (
        "memlens::" in function or ENTRY.match(function))
    if AGENT.search(path) or inlined_into_agent:
        return "short path" if ENTRY.match(function) else "record"
    return "program"


def callgrind(cmd, env, tmp):
    """{part: [instructions, D1 misses]} of one run of cmd under callgrind, thread by thread."""
    for old in tmp.glob("callgrind.out*"):
        old.unlink()
    out = tmp / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", "--cache-sim=yes",
                    f"--callgrind-out-file={out}", "--"] + cmd,
                   env=env, check=True, capture_output=True)
    parts = collections.defaultdict(lambda: [0, 0])
    for thread in sorted(tmp.glob("callgrind.out-*")):
        table = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", "--auto=no",
                                "--show=Ir,D1mr,D1mw", str(thread)],
                               check=True, capture_output=True, text=True).stdout
        rows = []
        for line in table.splitlines():
            m = re.match(r"^\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?([\d,]+|\.)\s+"
                         r"(?:\([\s\d.]+%\)\s+)?([\d,]+|\.)\s+(?:\([\s\d.]+%\)\s+)?"
                         r"(\S.*?)(?: \[[^\]]*\])?$", line)
            if not m or "PROGRAM TOTALS" in line or ":" not in m[4]:
                continue
            path, _, function = m[4].partition(":")
            counts = [0 if v == "." else int(v.replace(",", "")) for v in m.group(1, 2, 3)]
            rows.append((path, function, counts[0], counts[1] + counts[2]))
        writer = any(WRITER_THREAD.search(function) for _, function, _, _ in rows)
        for path, function, instructions, misses in rows:
            part = parts["writer" if writer else part_of(path, function)]
            part[0] += instructions
            part[1] += misses
    return parts


def recorded_events(memlens, capture):
    """Events the capture holds (sampled: those of sampled blocks, two each with the free)."""
    out = subprocess.run([str(memlens), "summary", "--json", str(capture)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["totals"]["events"]


def measure(build, cmd, tmp, sample_rate):
    lib = build / "lib" / "libmemlens.so"
    capture = tmp / "capture.mlens"
    env = dict(os.environ, LD_PRELOAD=str(lib), MEMLENS_OUTPUT=str(capture),
               MEMLENS_SAMPLE_SEED="1")
    env.pop("MEMLENS_TRACKED", None)
    if sample_rate:
        env["MEMLENS_SAMPLE_RATE"] = str(sample_rate)
    parts = callgrind(cmd, env, tmp)
    return parts, recorded_events(build / "bin" / "memlens", capture)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--workload", default="churn_1t", choices=sorted(bench.WORKLOADS))
    p.add_argument("--iterations", type=int, default=bench.ITERATIONS // 10,
                   help="allocations (default: a tenth of the suite's, ~5 s a run)")
    p.add_argument("--build-dir", type=Path, default=bench.ROOT / "build")
    p.add_argument("--baseline-build-dir", type=Path, help="another build, measured beside it")
    args = p.parse_args()
    if not (shutil.which("valgrind") and shutil.which("cg_annotate")):
        sys.exit("instruction_cost: needs valgrind's callgrind (apt-get install valgrind)")
    source, extra = bench.WORKLOADS[args.workload]
    cmd = [str(bench.build(source))] + extra + [str(args.iterations)]
    builds = [("this build", args.build_dir.resolve())]
    if args.baseline_build_dir:
        builds.append(("baseline", args.baseline_build_dir.resolve()))
    for _, build in builds:
        if not (build / "lib" / "libmemlens.so").exists():
            sys.exit(f"instruction_cost: no {build}/lib/libmemlens.so: build memlens first")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = callgrind(cmd, dict(os.environ), tmp)
        program = [sum(v[0] for v in base.values()), sum(v[1] for v in base.values())]
        print(f"{args.workload}, {args.iterations} allocations, under callgrind: "
              "instructions / first-level data-cache misses per recorded event\n")
        print("| mode | build | " + " | ".join(PARTS[:4]) + " | program (Δ) | "
              "on the program's thread | writer |")
        print("|" + "---|" * (len(PARTS) + 3))
        for mode, rate in (("sampled (32 KiB)", 32768), ("full", 0)):
            for label, build in builds:
                parts, events = measure(build, cmd, tmp, rate)
                parts["program"][0] -= program[0]
                parts["program"][1] -= program[1]
                cells = {k: (parts[k][0] / events, parts[k][1] / events) for k in PARTS}
                thread = [sum(cells[k][i] for k in ON_PROGRAM_THREAD) for i in (0, 1)]
                row = [cells[k] for k in PARTS[:5]] + [tuple(thread), cells["writer"]]
                print(f"| {mode} | {label} | " +
                      " | ".join(f"{ir:.0f} / {miss:.1f}" for ir, miss in row) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
