"""memlens.monitor (docs/monitor.md), on every interpreter under test: a program that grows by
known amounts at a marked line (tests/python/scripts/monitor_growth.py) gets a snapshot file
exactly at the steps that move traced memory by the threshold, each file loads with the exact
blocks of that line and metrics that agree with /proc, the top display names the growing line
first, a repeated task stops after its repeats, and the monitor thread never outlives the
program."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, REPO
from test_python import SCRIPTS, line_of

SCRIPT = "monitor_growth.py"
STEP = 400_000
# After each of the six steps of STEP bytes, then after dropping three: snapshots (and top
# displays) written so far. The threshold is 1,000,000: 3 steps up, 3 more up, 3 down.
EXPECTED_FILES = [0, 0, 1, 1, 1, 2, 3]
BLOCKS_IN_FILE = [3, 6, 3]  # blocks of @grow in snapshot 1, 2, 3


@pytest.fixture(scope="module")
def run(python, tmp_path_factory):
    """The program's report and its output folder: run once per interpreter."""
    tmp_path = tmp_path_factory.mktemp("monitor")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"), MEMLENS_BUILD_DIR=str(BUILD))
    proc = subprocess.run([str(python), str(SCRIPTS / SCRIPT), str(tmp_path)], capture_output=True,
                          text=True, timeout=600, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1]), tmp_path


def load(python, path, code):
    """What `code` prints about the snapshot `snap` loaded from path, under the interpreter."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"), MEMLENS_BUILD_DIR=str(BUILD))
    program = ("import sys, json\nfrom memlens import monitor\n"
               f"snap = monitor.load_snapshot({str(path)!r})\n{code}")
    return json.loads(python.output(program, env=env))


def test_threshold_snapshots_at_the_right_steps_with_exact_blocks(run, python):
    report, out = run
    assert [step["files"] for step in report["after"]] == EXPECTED_FILES
    names = sorted(p.name for p in out.glob("snap-*.pickle"))
    assert names == [f"snap-{report['pid']}-{n:04}.pickle" for n in (1, 2, 3)]
    size = python.size_of(f"b'x' * {STEP}")
    line = line_of(SCRIPT, "grow")
    for name, blocks in zip(names, BLOCKS_IN_FILE):
        found = load(python, out / name, (
            "stats = [s for s in snap.statistics('lineno')\n"
            f"         if s.traceback[0].filename.endswith('/{SCRIPT}')"
            f" and s.traceback[0].lineno == {line}]\n"
            "print(json.dumps([(s.size, s.count) for s in stats]))"))
        assert found == [[blocks * size, blocks]], name


def test_metrics_are_recorded_and_agree_with_proc(run, python):
    report, out = run
    after = report["after"]
    fired = [after[2], after[5], after[6]]  # the steps whose check wrote files 1, 2, 3
    for n, seen in enumerate(fired, 1):
        metrics = load(python, out / f"snap-{report['pid']}-{n:04}.pickle",
                       "print(json.dumps({k: [m.value, m.format] "
                       "for k, m in snap.metrics.items()}))")
        rss, vms = metrics["process.rss"][0], metrics["process.vms"][0]
        # The snapshot was taken between the step and the program's own reading of statm: the
        # monitor's own work (the analyzer's answer parsed) moves RSS by a few MiB at most.
        assert abs(rss - seen["rss"]) < 8 * 2**20, (n, rss, seen)
        assert abs(vms - seen["vms"]) < 64 * 2**20, (n, vms, seen)
        assert rss <= vms
        assert metrics["gc.objects"][1] == "int"
        assert 0.5 < metrics["gc.objects"][0] / seen["gc_objects"] < 1.5
        assert metrics["allocator.blocks"][0] > 1000
        # Traced memory at the moment: the kept blocks, and the program's other blocks since
        # start() (the open file's buffers: 129 KiB on 3.14t, the monitor's thread).
        kept = BLOCKS_IN_FILE[n - 1] * python.size_of(f"b'x' * {STEP}")
        assert kept <= metrics["tracemalloc.traced"][0] < kept + 512 * 1024
        assert metrics["tracemalloc.peak"][0] >= metrics["tracemalloc.traced"][0]
        assert metrics["memlens.capture"][0] > 0
        # At least one thread buffer: a 4 KiB header and a 2 MiB ring (thread_buffer.h).
        assert metrics["memlens.agent_memory"][0] >= 4096 + 2**21
        assert metrics["memlens.agent_memory"][0] < vms
    # Between files 1 and 2 the program touched 3 more steps of pages.
    first, second = (load(python, out / f"snap-{report['pid']}-{n:04}.pickle",
                          "print(snap.metrics['process.rss'].value)") for n in (1, 2))
    assert second - first > 2 * STEP


def test_allocator_metrics_before_tracing(run, python):
    """CPython reports its allocator only while no hook stands in front of it: before
    tracemalloc.start(). pymalloc on the default builds; the free-threaded builds' mimalloc
    reports zeros, which are left out."""
    untraced = run[0]["untraced"]
    assert untraced["allocator.blocks"] > 1000
    assert "tracemalloc.traced" not in untraced
    if python.free_threaded:
        assert not any(name.startswith(("pymalloc.", "mimalloc.")) for name in untraced)
        return
    assert untraced["pymalloc.arenas"] >= 1
    assert untraced["pymalloc.size"] % untraced["pymalloc.arenas"] == 0
    assert 0 < untraced["pymalloc.allocated"] <= untraced["pymalloc.size"]
    assert untraced["pymalloc.free"] == untraced["pymalloc.size"] - untraced["pymalloc.allocated"]


def test_top_display_names_the_growing_line(run, python):
    report, out = run
    assert [step["displays"] for step in report["after"]] == EXPECTED_FILES
    text = (out / "top.txt").read_text()
    displays = [block for block in text.split("\n\n") if block.strip()]
    assert len(displays) == 3
    where = f"{SCRIPTS / SCRIPT}:{line_of(SCRIPT, 'grow')}"
    firsts = [display.splitlines()[1] for display in displays]
    # First display: the biggest lines; then the lines that changed most since the previous.
    assert firsts[0].startswith(f"#1: {where}: size=") and firsts[0].endswith(", count=3")
    assert firsts[1].startswith(f"#1: {where}: size=") and firsts[1].endswith(", count=6 (+3)")
    assert firsts[2].startswith(f"#1: {where}: size=") and firsts[2].endswith(", count=3 (-3)")
    for display in displays:
        assert "metrics: process.rss=" in display


def test_repeat_delay_and_threads_stop(run):
    report, out = run
    assert "memlens-monitor" not in report["threads_after_cancel"]
    assert report["ticks"] == ["tick", "tick"]
    assert report["scheduled_after_repeats"] is False
    assert report["tasks"] == 1  # left scheduled at exit: the program still ended (run's rc 0)
    assert not list(out.glob("never-*"))


def test_misuse_is_refused_at_once(python):
    """A bad template fails when the task is made, a task without a threshold or a delay and a
    task scheduled while nothing traces are refused, each with its reason."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"), MEMLENS_BUILD_DIR=str(BUILD))
    refused = json.loads(python.output(
        "import json\nfrom memlens import monitor\nout = []\n"
        "def attempt(f):\n"
        "    try: f()\n"
        "    except Exception as e: out.append([type(e).__name__, str(e)])\n"
        "attempt(lambda: monitor.TakeSnapshotTask('snap-{pid}-{count}.pickle'))\n"
        "attempt(lambda: monitor.Task(print).schedule())\n"
        "task = monitor.Task(print); task.set_delay(1)\n"
        "attempt(task.schedule)\n"
        "attempt(lambda: task.set_memory_threshold(0))\n"
        "print(json.dumps(out + [monitor.get_tasks()]))", env=env))
    assert refused == [
        ["ValueError", "filename template 'snap-{pid}-{count}.pickle': 'count' is not one of "
                       "its fields {pid}, {counter}, {program}, {timestamp}"],
        ["ValueError", "a task needs a memory threshold or a delay: call "
                       "set_memory_threshold() or set_delay() first"],
        ["RuntimeError", "memlens.tracemalloc is not tracing: call memlens.tracemalloc.start() "
                         "before scheduling a task"],
        ["ValueError", "the memory threshold must be positive, not 0"],
        []]
