"""What recording costs the program's own resident memory (issue 32): the agent's rings live in
the recorded process (shared with memlens run, which hosts the writer), so they count against
its peak. The
program prints its own VmHWM; the test runs it with and without memlens."""
import re
import subprocess

from conftest import MEMLENS, PROGRAMS, REPO

# Before issue 32 one churning thread cost 14.6 MiB more under full tracing (the writer's
# 131,072-event chunks copied twice, rings of 2 MiB from the start); 10.8 MiB with chunks of
# 65,536 events; with the writer hosted by memlens run (no writer thread, trie, encoder or chunk
# buffers in the program: docs/agent.md, "The hosted writer") about 3.3 MiB: the ring, the
# unwinder's tables, the agent's own code and data. The bound is the bar.
ONE_THREAD_EXTRA_KIB = 4 * 1024


def program_says(text):
    found = re.search(r"allocs=(\d+) frees=(\d+) vmhwm_kib=(\d+)", text)
    assert found, text
    return int(found[1]), int(found[2]), int(found[3])


def test_full_tracing_keeps_the_programs_own_peak_rss_small_and_loses_nothing(record):
    alone = subprocess.run([str(PROGRAMS / "churn_peak_rss"), "1"], capture_output=True,
                           text=True, timeout=60)
    assert alone.returncode == 0, alone.stderr
    _, _, unprofiled_kib = program_says(alone.stderr)

    run = record("churn_peak_rss", "1")
    assert run.proc.returncode == 0, run.proc.stderr
    allocs, frees, profiled_kib = program_says(run.proc.stderr)
    assert profiled_kib - unprofiled_kib <= ONE_THREAD_EXTRA_KIB, (
        f"peak RSS {profiled_kib} KiB under memlens against {unprofiled_kib} KiB alone")

    # Nothing lost: every allocation of the churn's line, and the program's totals.
    assert run.row_at("churn_peak_rss.c", "step")["allocations"] == 250000
    assert run.row_at("churn_peak_rss.c", "window")["allocations"] == 1
    totals = run.analyze("summary")["totals"]
    assert totals["dropped_events"] == 0, totals
    assert totals["allocations"] >= allocs and totals["frees"] >= frees, totals


def peak_kib(stderr):
    found = re.search(r"vmhwm_kib=(\d+)", stderr)
    assert found, stderr
    return int(found[1])


def test_a_python_programs_own_peak_rss_stays_within_the_bar(python, tmp_path):
    """bench's py_objects (a third of its size): the Python side's tables (code objects by
    address, the unwinder's rules), the ring and the agent's code, against the issue's bar of
    1.15x or +4 MiB, whichever is larger. It was +7.1 MiB with 2 MiB rings and hashed tables."""
    script = [str(REPO / "bench" / "workloads" / "peak_rss.py"),
              str(REPO / "bench" / "workloads" / "py_objects.py"), "0.3"]
    alone = subprocess.run([str(python.executable), *script], capture_output=True, text=True,
                           timeout=120)
    assert alone.returncode == 0, alone.stderr
    run = subprocess.run([str(MEMLENS), "run", "-o", str(tmp_path / "p.mlens"), "--",
                          str(python.executable), *script], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout == alone.stdout, run.stderr
    unprofiled, profiled = peak_kib(alone.stderr), peak_kib(run.stderr)
    assert profiled <= max(unprofiled * 1.15, unprofiled + 4 * 1024), (profiled, unprofiled)
