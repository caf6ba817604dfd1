#!/usr/bin/env python3
"""The cost of memlens for a Windows program under Wine (issue 31): tests/windows/churn.c,
cross-built with mingw-w64 (STEPS rounds of free+malloc over a 1000-block window), in paired
rounds (the order rotating from round to round):

  unprofiled     wine churn.exe STEPS
  memlens        wine memlens.exe run -o CAPTURE -- churn.exe STEPS
  unprofiled_0   wine churn.exe 0: Wine's start and exit of a process that does no work
  memlens_0      the same under memlens.exe: adds the agent's start (injection, module scan,
                 writer) and the capture's end

memlens.exe, its agent DLL and churn.exe are copied to bench/results/windows/ first, so a
rebuild during the run does not change what is measured (the results name the build folder's
checkout HEAD: the build's commit only if it was built from it). Each time is the wall time of
the wine command (its output to a file). The wineserver is started once on /dev/null and kept
for the whole run: its services inherit the handles of the process that starts them, and on a
pipe a later run would wait for it to close. The prefix is the benchmark's own
(~/.cache/memlens/wine-prefix-bench, made on the first run), not the tests': `wineserver -k`
at the end of a test run kills every program of its prefix, which ended runs of this
benchmark (exit status 1, no output) while tests ran. Every profiled run's capture is read
with the Linux `memlens summary --json` and must hold STEPS+ allocations.
Prints, and writes to bench/results/windows_bench.md with every round's raw times, the medians
over rounds of:

  memlens × unprofiled        the slowdown as a user sees it
  memlens_0 × unprofiled_0    the fixed cost: Wine's process start, and the agent's
  per allocation              (memlens - memlens_0) / (unprofiled - unprofiled_0): the fixed
                              costs taken out, what recording each free+malloc costs

    python3 bench/windows_bench.py [--runs N] [--steps N] [--windows-build-dir build-windows]
        [--build-dir build] [--wine-prefix DIR]
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
COLUMNS = ("unprofiled", "memlens", "unprofiled_0", "memlens_0")
RATIOS = {
    "memlens × unprofiled": lambda s: s["memlens"] / s["unprofiled"],
    "memlens_0 × unprofiled_0": lambda s: s["memlens_0"] / s["unprofiled_0"],
    "per allocation": lambda s: ((s["memlens"] - s["memlens_0"])
                                 / (s["unprofiled"] - s["unprofiled_0"])),
}


def wine_env(prefix):
    return {**os.environ, "WINEPREFIX": str(prefix), "WINEDEBUG": "-all",
            "WINEDLLOVERRIDES": "winedbg.exe=d;mscoree=d;mshtml=d"}


def quiet(wine, env, *argv):
    """Runs a wine command with no standard handle on a pipe (see the docstring)."""
    subprocess.run([wine, *argv] if wine else list(argv), env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300, check=False)


def timed(wine, env, argv, out):
    """Seconds the wine command ran; its output goes to out.stdout and out.stderr."""
    with open(f"{out}.stdout", "w") as stdout, open(f"{out}.stderr", "w") as stderr:
        start = time.perf_counter()
        proc = subprocess.run([wine, *map(str, argv)], env=env, stdin=subprocess.DEVNULL,
                              stdout=stdout, stderr=stderr, cwd=out.parent, timeout=600)
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}: {Path(f'{out}.stdout').read_text()}"
                         f"{Path(f'{out}.stderr').read_text()}")
    return seconds


def allocations(memlens, capture, env):
    """totals.allocations of the capture, read by the Linux memlens."""
    out = subprocess.run([str(memlens), "summary", str(capture), "--json"], env=env,
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise SystemExit(f"memlens summary {capture} failed: {out.stderr}")
    return json.loads(out.stdout)["totals"]["allocations"]


def run_column(column, steps, paths, wine, env, tmp):
    """One run of one column; checks what the program printed and, profiled, the capture."""
    n = 0 if column.endswith("_0") else steps
    out = tmp / column
    capture = tmp / f"{column}.mlens"
    capture.unlink(missing_ok=True)
    argv = [paths["churn"], n]
    if column.startswith("memlens"):
        argv = [paths["launcher"], "run", "-o", capture, "--", *argv]
    seconds = timed(wine, env, argv, out)
    if Path(f"{out}.stdout").read_text().strip() != f"churned {n}":
        raise SystemExit(f"{column}: unexpected output {Path(f'{out}.stdout').read_text()!r}")
    if column.startswith("memlens"):
        recorded = allocations(paths["memlens"], capture, env)
        if recorded < n:
            raise SystemExit(f"{column}: the capture holds {recorded} allocations, not {n}+")
    return seconds


def git_head(folder):
    return subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "unknown"


def describe(args, paths, wine, minutes, load):
    version = subprocess.run([wine, "--version"], capture_output=True, text=True).stdout.strip()
    return (f"Generated by `python3 bench/windows_bench.py --runs {args.runs} --steps "
            f"{args.steps}` on {datetime.date.today()} in {minutes:.0f} min; bench/"
            f"windows_bench.py's docstring states the method. memlens.exe, its agent and "
            f"churn.exe from {args.windows_build_dir} (its checkout at {paths['commit']}); "
            f"{version}, WINEDEBUG=-all. Machine: "
            f"{os.cpu_count()} CPUs; load average {load[0]:.1f} at the start and "
            f"{os.getloadavg()[0]:.1f} at the end (shared: read the ratios, not the seconds).\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20_000_000)
    parser.add_argument("--windows-build-dir", type=Path, default=REPO / "build-windows")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build")
    parser.add_argument("--wine-prefix", type=Path,
                        default=Path.home() / ".cache" / "memlens" / "wine-prefix-bench")
    args = parser.parse_args()
    wine = shutil.which("wine") or shutil.which("wine64")
    win = args.windows_build_dir.resolve()
    built = {"bin/memlens.exe", "bin/memlens_agent.dll", "tests/churn.exe"}
    memlens = args.build_dir.resolve() / "bin" / "memlens"
    missing = [str(p) for p in [win / f for f in built] + [memlens] if not p.exists()]
    if wine is None or missing:
        raise SystemExit(f"windows_bench needs wine (Debian: wine64) and {', '.join(missing)}")
    copy = RESULTS / "windows"
    for f in built:
        (copy / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(win / f, copy / f)
    paths = {"launcher": copy / "bin" / "memlens.exe", "churn": copy / "tests" / "churn.exe",
             "memlens": memlens, "commit": git_head(win)}
    args.wine_prefix.parent.mkdir(parents=True, exist_ok=True)
    env = wine_env(args.wine_prefix)
    load, began = os.getloadavg(), time.perf_counter()
    quiet(None, env, "wineserver", "-p")
    quiet(wine, env, "cmd", "/c", "exit")  # the warm-up (a new prefix is made here: 30 s)
    rounds = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for round_ in range(args.runs):
                turn = round_ % len(COLUMNS)
                rounds.append({c: run_column(c, args.steps, paths, wine, env, Path(tmp))
                               for c in COLUMNS[turn:] + COLUMNS[:turn]})
                print(f"round {round_ + 1}/{args.runs} done", flush=True)
    finally:
        quiet(None, env, "wineserver", "-k")
    medians = {name: statistics.median(ratio(s) for s in rounds) for name, ratio in RATIOS.items()}
    table = ("| steps | " + " | ".join(RATIOS) + " |\n|---|---|---|---|\n"
             f"| {args.steps:,} | " + " | ".join(f"{m:.2f}" for m in medians.values()) + " |\n")
    raw = ("| round | " + " | ".join(f"{c} s" for c in COLUMNS) + " | " + " | ".join(RATIOS)
           + " |\n|" + "---|" * (1 + len(COLUMNS) + len(RATIOS)) + "\n")
    for i, s in enumerate(rounds, start=1):
        raw += (f"| {i} | " + " | ".join(f"{s[c]:.3f}" for c in COLUMNS) + " | "
                + " | ".join(f"{ratio(s):.2f}" for ratio in RATIOS.values()) + " |\n")
    minutes = (time.perf_counter() - began) / 60
    text = (f"# memlens for Windows under Wine: churn\n\n"
            f"{describe(args, paths, wine, minutes, load)}\n"
            f"## Medians of {args.runs} paired rounds (wall time)\n\n{table}"
            f"\n## Every round\n\nOrder rotating over {', '.join(COLUMNS)} from round to round; "
            f"each profiled capture held {args.steps:,}+ allocations (checked).\n\n{raw}")
    (RESULTS / "windows_bench.md").write_text(text)
    print("\n" + table + f"\nwritten to {RESULTS / 'windows_bench.md'}")


if __name__ == "__main__":
    main()
