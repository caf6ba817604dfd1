"""The analyzer's replay, before and after: one capture of the churn workload (or of the
command given after --), recorded once by this build, replayed in full (`memlens summary
--json`, no snapshot index) by this build and by another (`--baseline-build-dir`, e.g. main's),
alternately, in paired rounds. Prints each build's replay throughput (events per CPU second)
and the median over rounds of the CPU and wall ratios this/baseline: the check that a change
to the analyzer did not slow it.

    python3 bench/replay_bench.py --baseline-build-dir /tmp/main/build [--runs 7]
    python3 bench/replay_bench.py --baseline-build-dir /tmp/main/build -- python3 bench/workloads/py_objects.py

Both builds must read the capture format this build writes. Stdlib only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import run_with_cpu  # noqa: E402

HERE = Path(__file__).resolve().parent


def build_churn(tmp):
    """The suite's churn workload, compiled here (bench/workloads/churn.cc)."""
    binary = Path(tmp) / "churn"
    subprocess.run(["g++", "-O2", "-pthread", "-o", str(binary), str(HERE / "workloads" / "churn.cc")],
                   check=True)
    return binary


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", type=Path, default=HERE.parent / "build")
    p.add_argument("--baseline-build-dir", type=Path, required=True)
    p.add_argument("--runs", type=int, default=7, help="paired rounds (default 7)")
    p.add_argument("--churn-args", default="1 3000000", help="THREADS ITERATIONS of the churn workload")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- a program to record instead of churn")
    args = p.parse_args()
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    builds = {"this": args.build_dir.resolve() / "bin" / "memlens",
              "baseline": args.baseline_build_dir.resolve() / "bin" / "memlens"}
    for name, binary in builds.items():
        if not os.access(binary, os.X_OK):
            sys.exit(f"replay_bench: no memlens in the {name} build: {binary}")
    os.environ["MEMLENS_INDEX"] = "0"  # every summary replays the whole capture
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "churn.mlens"
        workload = args.command or [str(build_churn(tmp))] + args.churn_args.split()
        subprocess.run([str(builds["this"]), "run", "--no-index", "-o", str(capture), "--"] + workload,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        summary = json.loads(subprocess.run([str(builds["this"]), "summary", "--json", str(capture)],
                                            capture_output=True, text=True, check=True).stdout)
        events = summary["totals"]["events"]
        cpu = {name: [] for name in builds}
        wall = {name: [] for name in builds}
        log = Path(tmp) / "log"
        for round_ in range(args.runs):
            order = list(builds) if round_ % 2 == 0 else list(reversed(builds))
            for name in order:
                rc, w, c, _ = run_with_cpu([str(builds[name]), "summary", "--json", str(capture)], log)
                if rc != 0:
                    sys.exit(f"replay_bench: the {name} build's summary failed: {log.read_text()[-500:]}")
                cpu[name].append(c)
                wall[name].append(w)
    what = " ".join(args.command) if args.command else f"churn {args.churn_args}"
    print(f"capture: {what}, "
          f"{events:,} events; {args.runs} paired rounds, no index")
    for name in builds:
        rate = f", {events / statistics.median(cpu[name]) / 1e6:.2f} M events per CPU second"
        print(f"  {name:9} median CPU {statistics.median(cpu[name]):.2f} s, wall "
              f"{statistics.median(wall[name]):.2f} s{rate}")
    cpu_ratio = statistics.median(a / b for a, b in zip(cpu["this"], cpu["baseline"]))
    wall_ratio = statistics.median(a / b for a, b in zip(wall["this"], wall["baseline"]))
    print(f"  this/baseline: CPU {cpu_ratio:.3f}, wall {wall_ratio:.3f} (medians of the rounds' ratios)")


if __name__ == "__main__":
    main()
