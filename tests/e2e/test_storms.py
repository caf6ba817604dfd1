"""Storms (issue 25): threads, forks, signals, dlopen/dlclose and SIGKILL hammer the agent. Each
test runs its program (tests/programs/storm_*.c) once without memlens and once under `memlens
run` in full tracing, compares the program's own output and exit status, and compares the
capture's figures with the counts the program printed itself."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, line_of, memlens


def run_alone(program, *args, timeout=120):
    return subprocess.run([str(PROGRAMS / program), *args], capture_output=True, text=True,
                          timeout=timeout)


def own_stderr(stderr):
    """The program's stderr: memlens run's own lines removed."""
    return "".join(line for line in stderr.splitlines(keepends=True)
                   if not line.startswith("memlens: "))


def assert_same_behaviour(recorded, alone):
    assert recorded.proc.returncode == alone.returncode, recorded.proc.stderr
    assert recorded.proc.stdout == alone.stdout
    assert own_stderr(recorded.proc.stderr) == alone.stderr


def assert_whole_capture(summary):
    """Finished normally, nothing dropped, no free of a block the capture missed."""
    assert summary["capture"]["complete"] and summary["capture"]["end_reason"] == "exit"
    assert summary["totals"]["dropped_events"] == 0
    assert summary["totals"]["unmatched_frees"] == 0


def figures(row):
    return (row["allocations"], row["allocated_bytes"], row["leaked_blocks"], row["leaked_bytes"])


def test_sixteen_threads_a_million_operations_each(record):
    """The issue's numbers: 16 threads x 1,000,000 malloc/realloc/free calls, all at once."""
    alone = run_alone("storm_threads")
    assert alone.returncode == 0, alone.stderr
    r = record("storm_threads", timeout=300)
    assert_same_behaviour(r, alone)
    printed = dict(re.findall(r"(\w+) (\d+)", alone.stdout))
    mallocs, malloc_bytes = int(printed["mallocs"]), int(printed["malloc_bytes"])
    reallocs, realloc_bytes = int(printed["reallocs"]), int(printed["realloc_bytes"])
    frees = int(printed["frees"])
    assert int(printed["operations"]) == 16_000_000 and mallocs > 1_000_000 and reallocs > 1_000_000

    # Every block the program made is seen made, with its bytes, and seen freed: a block leaves
    # the live set only by a free or realloc matched to it, so its line's leaked_blocks of 0
    # means the capture holds exactly the program's frees (each block is freed once, at the end
    # at the latest: the program's frees are its mallocs plus its reallocs).
    assert figures(r.row_at("storm_threads.c", "storm_malloc")) == (mallocs, malloc_bytes, 0, 0)
    assert figures(r.row_at("storm_threads.c", "storm_realloc")) == (reallocs, realloc_bytes, 0, 0)
    assert frees == mallocs + reallocs
    summary = r.analyze("summary")
    assert_whole_capture(summary)
    assert summary["process"]["threads"] == 17  # the 16 and main (its pthread_create, stdout)
    totals = summary["totals"]
    # The rest is the C runtime's own (thread set-up, stdio): a few blocks per thread, and it
    # adds up too. What it still holds at exit is classed as the runtime's, not as in use by the
    # program (docs/runtime-allocations.md).
    runtime_allocations = totals["allocations"] - mallocs - reallocs
    runtime_frees = totals["frees"] - frees
    assert 0 <= runtime_allocations < 100 and runtime_frees >= 0
    assert totals["in_use_at_exit_blocks"] == 0
    assert runtime_allocations - runtime_frees == summary["runtime"]["blocks"]


@pytest.mark.parametrize("form", ["exit", "exec"])
def test_two_hundred_forks(record, tmp_path, form):
    """200 children, by fork then exit()/_exit(), or fork then exec of the program itself; each
    allocates and ends with its own status while the parent allocates between forks and a second
    thread of the parent allocates all the while. Children are not recorded (docs/agent.md); none
    hangs, and the parent's capture is whole and exact."""
    def timing_free(out):  # how often the second thread allocated depends on timing
        return re.sub(r"^meanwhile: \d+ blocks, \d+ bytes", "meanwhile: N", out, flags=re.M)
    alone = run_alone("storm_forks", form)
    assert alone.returncode == 0 and "\n200 of 200 children exited as expected\n" in alone.stdout
    assert len(alone.stdout.splitlines()) == 202
    r = record("storm_forks", form, timeout=120)
    assert r.proc.returncode == 0, r.proc.stderr
    assert timing_free(r.proc.stdout) == timing_free(alone.stdout)
    assert own_stderr(r.proc.stderr) == alone.stderr == ""
    blocks, size = map(int, re.search(r"^meanwhile: (\d+) blocks, (\d+) bytes$", r.proc.stdout,
                                      flags=re.M).groups())
    assert figures(r.row_at("storm_forks.c", "meanwhile")) == (blocks, size, 0, 0)
    summary = r.analyze("summary")
    assert_whole_capture(summary)
    assert summary["process"]["earlier_images"] == []  # no child wrote into the parent's capture
    kept = [100 + i for i in range(200) if i % 2 == 1]
    assert figures(r.row_at("storm_forks.c", "between")) == (
        200, sum(100 + i for i in range(200)), len(kept), sum(kept))
    assert r.rows_at("storm_forks.c", "in_child") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["storm_forks.mlens", "storm_forks.mlens.index"]


def test_signals_every_20_microseconds(record):
    """SIGALRM every 20 us while two threads allocate; the handler allocates whenever the thread
    it interrupted is between allocator calls. Nothing deadlocks, read() is interrupted or
    restarted as without memlens, and every allocation, the handler's included, is counted."""
    def timing_free(out):  # how many signals came depends on timing
        return re.sub(r"^handler: \d+ signals, \d+ blocks", "handler: N signals, N blocks", out,
                      flags=re.M)
    alone = run_alone("storm_signals")
    assert alone.returncode == 0, alone.stderr
    r = record("storm_signals", timeout=120)
    assert r.proc.returncode == 0, r.proc.stderr
    assert timing_free(r.proc.stdout) == timing_free(alone.stdout)
    assert own_stderr(r.proc.stderr) == alone.stderr == ""
    assert r.proc.stdout.startswith("read without SA_RESTART: EINTR\nread with SA_RESTART: restarted\n")
    printed = r.proc.stdout.splitlines()
    main_blocks, main_bytes = map(int, re.fullmatch(r"main: (\d+) blocks, (\d+) bytes", printed[2]).groups())
    thread_blocks, thread_bytes = map(int, re.fullmatch(r"thread: (\d+) blocks, (\d+) bytes", printed[3]).groups())
    signals, handler_blocks = map(int, re.fullmatch(
        r"handler: (\d+) signals, (\d+) blocks of 24 bytes", printed[4]).groups())
    assert signals >= 1000 and handler_blocks > 0, "the storm did not happen"

    assert figures(r.row_at("storm_signals.c", "main_loop")) == (main_blocks, main_bytes, 0, 0)
    assert figures(r.row_at("storm_signals.c", "thread_loop")) == (thread_blocks, thread_bytes, 0, 0)
    assert figures(r.row_at("storm_signals.c", "in_handler")) == (handler_blocks, 24 * handler_blocks, 0, 0)
    assert_whole_capture(r.analyze("summary"))


def test_dlopen_dlclose_a_thousand_times(record):
    """A library that allocates in its constructor and frees in its destructor, loaded, called
    and unloaded 1,000 times (probably at the same address each time): counts exact, and its
    frames still symbolized after it is gone."""
    alone = run_alone("storm_dlopen")
    assert alone.returncode == 0 and alone.stdout == "1000 loads, 1000 unloads, 12000 bytes kept\n"
    r = record("storm_dlopen", timeout=120)
    assert_same_behaviour(r, alone)
    assert_whole_capture(r.analyze("summary"))
    load = r.row_at("libstorm_plugin.c", "plugin_load")
    assert load["site"]["function"] == "plugin_load"
    assert load["site"]["module"].endswith("/storm_plugin.so")
    assert figures(load) == (1000, 1000 * 5555, 0, 0)
    work = r.row_at("libstorm_plugin.c", "plugin_work")
    assert work["site"]["function"] == "plugin_work"
    assert work["site"]["module"].endswith("/storm_plugin.so")
    assert figures(work) == (1000, sum(100 + i % 50 for i in range(1000)), 100, 12000)


def children_of(parent):
    """The pids of the processes whose parent is `parent`."""
    children = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == parent:
                    children.append(int(pid))
        except (OSError, IndexError, ValueError):
            pass  # exited meanwhile
    return children


def test_sigkill_mid_storm_keeps_what_was_flushed(tmp_path):
    """storm_kill keeps 100,000 blocks, says so, then churns on two threads until killed. Once
    the capture on disk holds those blocks, the program is SIGKILLed in mid-churn. memlens run,
    which hosts the writer, drains what the program left in its rings and ends the capture with
    the signal: the 100,000 kept blocks exactly, at least the churn read before the kill, and at
    most one live churn block per thread."""
    alone = subprocess.Popen([str(PROGRAMS / "storm_kill")], stdout=subprocess.PIPE, text=True)
    announced = alone.stdout.readline()
    alone.kill()
    assert alone.wait(timeout=30) == -signal.SIGKILL and alone.stdout.read() == ""
    kept_blocks, kept_bytes = map(int, re.fullmatch(
        r"allocated (\d+) blocks, (\d+) bytes\n", announced).groups())

    capture = tmp_path / "storm_kill.mlens"
    proc = subprocess.Popen([str(MEMLENS), "run", "-o", str(capture), "--",
                             str(PROGRAMS / "storm_kill")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == announced
        r = Recorded(proc, capture)
        deadline = time.monotonic() + 30
        while True:  # until the kept blocks are on disk
            # (Until the writer's first chunk, the file is no capture yet: exit status 2.)
            top = memlens("top", capture, "--json", "--by", "line", "--limit", "100000")
            rows = json.loads(top.stdout)["rows"] if top.returncode == 0 else []
            at = {line: sum(row["allocations"] for row in rows
                            if row["site"]["file"].endswith("/storm_kill.c")
                            and row["site"]["line"] == line_of("storm_kill.c", line))
                  for line in ("kept", "churn")}
            if at["kept"] == kept_blocks:
                break
            assert time.monotonic() < deadline, "the kept blocks never reached the capture"
            time.sleep(0.1)
        churn_before = at["churn"]
        [program] = children_of(proc.pid)
        os.kill(program, signal.SIGKILL)
        assert proc.wait(timeout=60) == 128 + signal.SIGKILL
    finally:
        if proc.poll() is None:  # something above failed: leave nothing running
            for pid in children_of(proc.pid):
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait(timeout=30)
    assert proc.stdout.read() == ""
    assert "storm_kill was killed by signal 9" in proc.stderr.read()

    summary = r.analyze("summary")
    assert summary["capture"]["complete"] and summary["capture"]["end_reason"] == "signal"
    assert figures(r.row_at("storm_kill.c", "kept")) == (kept_blocks, kept_bytes, kept_blocks, kept_bytes)
    churn = r.row_at("storm_kill.c", "churn")
    assert churn["allocations"] >= churn_before
    assert churn["leaked_blocks"] <= 2  # at most one block per churning thread was live
    text = memlens("summary", capture)
    assert text.returncode == 0, text.stderr
    assert "did not finish" not in text.stdout + text.stderr
