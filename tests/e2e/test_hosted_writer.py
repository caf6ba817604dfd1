"""The writer hosted by `memlens run` (docs/agent.md, "The hosted writer"): what the review of
the branch found (counts that must reach the END record, a program that scribbles over its
rings, a memlens run that is gone, descriptors, children that share the rings)."""
import os
import signal
import subprocess
import time

from conftest import MEMLENS, PROGRAMS, Recorded


def test_threads_beyond_the_rings_are_counted_as_dropped(record):
    """520 threads at once, 512 rings: main and 511 workers record, the 9 others' 100 mallocs
    and 100 frees each are left out, and the capture says exactly how many."""
    r = record("threads_over_slots")
    assert r.proc.returncode == 0 and r.proc.stdout == "done\n", r.proc.stderr
    row = r.row_at("threads_over_slots.c", "work")
    assert row["allocations"] % 100 == 0
    recorded_threads = row["allocations"] // 100
    assert recorded_threads == 511  # main took a ring first (its pthread_create allocates)
    summary = r.analyze("summary")
    assert summary["capture"]["complete"]
    assert summary["totals"]["dropped_events"] == (520 - recorded_threads) * 200
    assert summary["process"]["threads"] == 512


def test_a_program_whose_memlens_run_is_gone_does_not_wait_for_it(tmp_path):
    """memlens run is killed while the program runs: the program's three memlens_flush() calls
    (each a wait for the writer of up to 10 s) return at once, and the program ends as it
    would."""
    proc = subprocess.Popen([str(MEMLENS), "run", "-o", str(tmp_path / "c.mlens"), "--",
                             str(PROGRAMS / "host_gone")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.kill()
    assert proc.wait(timeout=30) == -9
    proc.stdin.write("go\n")
    proc.stdin.close()  # the program holds the pipes still: memlens run passed them on
    waited_ms = int(proc.stdout.readline())
    assert proc.stdout.read() == ""  # the program exited
    assert waited_ms < 1000


def fds_of(command, memlens_env=None):
    """The descriptor numbers `command` (a shell line that lists some) prints, run alone and under
    memlens run with `memlens_env` added."""
    alone = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60)
    recorded = subprocess.run([str(MEMLENS), "run", "--", "/bin/sh", "-c", command],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, **(memlens_env or {})})
    assert alone.returncode == 0 and recorded.returncode == 0, recorded.stderr
    return alone.stdout.split(), recorded.stdout.split()


def test_a_program_that_does_not_record_inherits_no_exchange(tmp_path):
    """The agent goes passive (a bad setting): the shell's descriptors are the ones it has
    without memlens, and MEMLENS_EXCHANGE is not in its environment."""
    os.chdir(tmp_path)  # the capture of a passive run, if any, stays here
    alone, recorded = fds_of("ls /proc/$$/fd; env | grep -c MEMLENS_EXCHANGE || true",
                             {"MEMLENS_SAMPLE_SEED": "bogus"})
    assert recorded == alone and alone[-1] == "0"


def test_an_exec_that_drops_the_agent_inherits_no_exchange(tmp_path):
    """The recorded shell execs `env -i ls`: ls runs without the agent (an empty environment),
    so the exchange stays closed across that exec: ls sees the descriptors it sees alone."""
    os.chdir(tmp_path)
    alone, recorded = fds_of("exec env -i /bin/ls /proc/self/fd")
    assert recorded == alone == ["0", "1", "2", "3"]


def test_a_child_made_without_fork_handlers_writes_nothing_into_its_parents_rings(record):
    """_Fork() runs no atfork handler, and the rings are shared memory: the child's 100 blocks
    must not reach the parent's capture, and the parent's 10 must all be there."""
    r = record("raw_fork")
    assert r.proc.returncode == 0 and r.proc.stdout == "child 0\n", r.proc.stderr
    parent = r.row_at("raw_fork.c", "parent")
    assert (parent["allocations"], parent["allocated_bytes"]) == (10, 5550)
    assert r.rows_at("raw_fork.c", "child") == []
    summary = r.analyze("summary")
    assert summary["capture"]["complete"] and summary["totals"]["unmatched_frees"] == 0
    assert summary["totals"]["dropped_events"] == 0


def test_a_writer_resumed_after_its_image_was_replaced_leaves_the_new_rings_alone(tmp_path):
    """memlens run is stopped across the program's exec: the new image's 20 blocks of 333 bytes
    and the 20 of 444 it makes later are in the new image, with their frees, once memlens run
    goes on."""
    capture = tmp_path / "c.mlens"
    proc = subprocess.Popen([str(MEMLENS), "run", "-o", str(capture), "--",
                             str(PROGRAMS / "stale_exec")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "execd\n"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    time.sleep(0.3)  # the old image's writer runs on
    proc.stdin.write("go\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    r = Recorded(proc, capture)
    row = r.row_at("stale_exec.c", "new")
    assert (row["allocations"], row["allocated_bytes"], row["leaked_blocks"]) == (20, 6660, 0)
    row = r.row_at("stale_exec.c", "after")
    assert (row["allocations"], row["allocated_bytes"], row["leaked_blocks"]) == (20, 8880, 0)
    summary = r.analyze("summary")
    assert len(summary["process"]["earlier_images"]) == 1
    assert summary["capture"]["complete"] and summary["totals"]["unmatched_frees"] == 0
    assert summary["capture"]["warnings"] == []  # the new image's stacks were in the old one's
