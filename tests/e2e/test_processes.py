"""Processes: output and exit status pass through; fork, exec, dlopen, abort and SIGKILL."""
import os
import signal
import subprocess
import time

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, line_of, record_killed


def test_stdio_arguments_and_exit_status_pass_through(record):
    r = record("passthrough", "a b", "--flag", stdin="hello\nworld\n")
    assert r.proc.returncode == 7
    assert r.proc.stdout == "HELLO\nWORLD\n"
    assert r.proc.stderr.startswith("argc=3 last=--flag\n")
    assert r.row_at("passthrough.c", "block")["leaked_bytes"] == 64


def test_fork_child_is_not_recorded(record, tmp_path):
    r = record("forks")
    assert r.proc.returncode == 0
    assert "child ok" in r.proc.stdout and "parent: child exited 0" in r.proc.stdout
    assert r.row_at("forks.c", "before")["leaked_bytes"] == 1000
    assert r.row_at("forks.c", "after")["leaked_bytes"] == 3000
    assert r.rows_at("forks.c", "in_child") == []
    # No child capture (the index is the one memlens run writes for forks.mlens).
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forks.mlens", "forks.mlens.index"]


def test_exec_is_followed_into_the_same_capture(record, tmp_path):
    """exec_other allocates, then execs /bin/sh: the capture holds both images and answers for
    the last one, naming the first."""
    r = record("exec_other")
    assert r.proc.returncode == 4 and r.proc.stdout == "exec-ed\n"
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "exit" and summary["capture"]["complete"]
    assert summary["process"]["argv"] == ["sh", "-c", "echo exec-ed; exit 4"]
    assert summary["process"]["executable"] == os.path.realpath("/bin/sh")
    earlier = summary["process"]["earlier_images"]
    assert len(earlier) == 1 and earlier[0][0].endswith("exec_other")
    assert summary["totals"]["allocations"] > 0  # the shell's own allocations
    assert r.rows_at("exec_other.c", "before_exec") == []  # the first image is not mixed in
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exec_other.mlens", "exec_other.mlens.index"]


def test_dlopened_library_is_symbolized_after_dlclose(record):
    r = record("dlopen_plugin")
    assert r.proc.returncode == 0, r.proc.stderr
    row = r.row_at("libplugin_alloc.c", "plugin_allocate")
    assert row["site"]["function"] == "plugin_allocate"
    assert row["site"]["module"].endswith("/plugin_alloc.so")
    assert (row["allocated_bytes"], row["leaked_bytes"]) == (4321, 4321)


def test_agent_leaves_no_dlerror_behind(record):
    """The agent's own failed dlsym calls (Py_Version in a C program) must not show through the
    program's dlerror(), nor leave blocks the program's next dl* call frees unseen."""
    alone = subprocess.run([str(PROGRAMS / "dlerror_first")], capture_output=True, text=True)
    assert alone.stdout == "dlerror: none\ndlopen: ok\n"
    r = record("dlerror_first")
    assert (r.proc.returncode, r.proc.stdout) == (0, alone.stdout)
    assert r.analyze("summary")["totals"]["unmatched_frees"] == 0


def test_dlopen_of_a_bare_name_searches_the_callers_runpath(record):
    """glibc's dlopen searches the RUNPATH of its caller; behind memlens's interposer the caller
    was memlens, and a plugin only the program's RUNPATH finds was not found."""
    alone = subprocess.run([str(PROGRAMS / "dlopen_runpath")], capture_output=True, text=True)
    assert (alone.returncode, alone.stdout) == (0, "dlopen: ok\n"), alone.stderr
    r = record("dlopen_runpath")
    assert (r.proc.returncode, r.proc.stdout) == (0, alone.stdout), r.proc.stderr
    row = r.row_at("libplugin_alloc.c", "plugin_allocate")
    assert row["site"]["module"].endswith("/runpath/runpath_plugin.so")
    assert (row["allocated_bytes"], row["leaked_bytes"]) == (4321, 0)


def test_stacks_through_dlopen_hold_no_memlens_frame(record):
    """The block the plugin's constructor allocates while dlopen runs it, and the one allocated
    through the plugin: exact stacks, with the loader's frames between the constructor and
    libc's dlopen, and none of memlens (its dlopen interposer sits between main and libc's)."""
    r = record("dlopen_plugin")
    assert r.proc.returncode == 0, r.proc.stderr
    stacks = {row["allocated_bytes"]: row["stack"]
              for row in r.analyze("top", "--by", "stack", "--limit", "100000")["rows"]
              if row["allocated_bytes"] in (1234, 4321)}

    def ours(stack):  # (function, source, line) of the test program's and the plugin's frames
        return [(f["function"], f["file"].rsplit("/", 1)[-1], f["line"]) for f in stack
                if f["file"].endswith(("/libplugin_alloc.c", "/dlopen_plugin.c"))]

    def module(frame):
        return frame["module"].rsplit("/", 1)[-1]

    plugin, program = "libplugin_alloc.c", "dlopen_plugin.c"
    at = line_of
    ctor = stacks[1234]
    assert ours(ctor) == [("plugin_constructor", plugin, at(plugin, "plugin_constructor")),
                          ("main", program, at(program, "dlopen"))]
    main = [f["function"] for f in ctor].index("main")
    # Between the constructor and main: the loader and the C library only, dlopen last.
    assert {module(f) for f in ctor[1:main]} == {"ld-linux-x86-64.so.2", "libc.so.6"}, ctor
    assert ctor[main - 1]["function"] in ("dlopen", "___dlopen") and module(ctor[main - 1]) == "libc.so.6"
    through = stacks[4321]
    assert ours(through) == [("plugin_allocate", plugin, at(plugin, "plugin_allocate")),
                             ("main", program, at(program, "allocate"))]
    assert [module(f) for f in through] == ["plugin_alloc.so", "dlopen_plugin", "libc.so.6",
                                            "libc.so.6", "dlopen_plugin"]
    for stack in (ctor, through):
        assert stack[-1]["function"] == "_start"
        assert not [f for f in stack if "memlens" in f["module"]], stack


def test_abort_keeps_the_capture_and_reports_the_signal(record):
    r = record("aborts")
    assert r.proc.returncode == 128 + signal.SIGABRT
    assert r.proc.stdout == "about to abort\n"
    assert "was killed by signal 6" in r.proc.stderr
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "signal"
    assert r.row_at("aborts.c", "before_abort")["leaked_bytes"] == 777


def test_sigkill_loses_nothing_that_reached_the_rings(tmp_path):
    """killed_after_blocks is killed as soon as it says it has made its 1,000 blocks, before an
    in-process writer's next flush: memlens run, which hosts the writer, drains the rings the
    program left and ends the capture with the signal waitpid reported."""
    capture = tmp_path / "killed.mlens"
    proc = record_killed(capture, program="killed_after_blocks", settle=0)
    assert "was killed by signal 9" in proc.stderr.read()
    r = Recorded(proc, capture)
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "signal" and summary["capture"]["complete"]
    row = r.row_at("killed_after_blocks.c", "blocks")
    assert (row["leaked_blocks"], row["leaked_bytes"]) == (1000, 96000)


def test_sigkill_of_an_in_process_writer_leaves_a_readable_capture(tmp_path):
    """The writer inside the program (as under plain LD_PRELOAD) dies with it: what it flushed
    stays readable, and the capture says it did not finish."""
    capture = tmp_path / "killed.mlens"
    proc = record_killed(capture, env={"MEMLENS_HOSTED_WRITER": "0"})
    assert "was killed by signal 9" in proc.stderr.read()
    r = Recorded(proc, capture)
    summary = r.analyze("summary")
    assert summary["capture"]["complete"] is False
    assert summary["capture"]["end_reason"] is None
    assert any("did not finish" in w for w in summary["capture"]["warnings"])
    assert r.row_at("wait_for_kill.c", "before_kill")["leaked_bytes"] == 888


def test_stalled_writer_drops_and_counts_instead_of_hanging(tmp_path):
    """The capture goes to a FIFO nobody reads for 3 s: the writer blocks, the thread buffer
    fills, the program keeps running (dropping), and the drops are counted in the capture."""
    fifo = tmp_path / "capture.fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    proc = subprocess.Popen([str(MEMLENS), "run", "-o", str(fifo), "--",
                             str(PROGRAMS / "churn_single")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    reader = os.open(fifo, os.O_RDONLY)  # the agent's open() of the FIFO completes now
    time.sleep(3.0)
    data = bytearray()
    while chunk := os.read(reader, 1 << 16):
        data += chunk
    os.close(reader)
    assert proc.wait(timeout=60) == 0
    assert proc.stdout.read() == "done\n"
    capture = tmp_path / "capture.mlens"
    capture.write_bytes(data)
    summary = Recorded(proc, capture).analyze("summary")
    dropped = summary["totals"]["dropped_events"]
    assert dropped > 0
    assert summary["capture"]["complete"]
    assert any("dropped" in w for w in summary["capture"]["warnings"])
    # Every one of the 800000 events (4096 first frees are of NULL) was either recorded or
    # counted as dropped.
    assert summary["totals"]["events"] + dropped >= 800000
    assert time.monotonic() - start < 30


def test_failing_disk_ends_the_capture_but_not_the_program(tmp_path):
    """The capture may grow to 64 KiB only (ulimit -f; churn_single's is about 1.5 MB): writes
    fail, memlens says so once, the program runs to the end with its own output and status, and
    the capture reads up to the cut."""
    capture = tmp_path / "small.mlens"
    script = (f"trap '' XFSZ; ulimit -f 64; exec {MEMLENS} run -o {capture} -- "
              f"{PROGRAMS / 'churn_single'}")
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "done\n"
    assert proc.stderr.count("writing the capture failed") == 1
    assert capture.stat().st_size <= 64 * 1024
    summary = Recorded(proc, capture).analyze("summary")
    assert summary["capture"]["complete"] is False


def test_failed_exec_keeps_recording(record):
    r = record("failed_exec")
    assert r.proc.returncode == 0 and r.proc.stdout == "still here\n"
    assert r.row_at("failed_exec.c", "before")["leaked_bytes"] == 1234
    assert r.row_at("failed_exec.c", "after")["leaked_bytes"] == 4321
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "exit" and summary["process"]["earlier_images"] == []


@pytest.mark.parametrize("hosted", [True, False], ids=["hosted", "in-process"])
def test_failed_execs_back_to_back_do_not_wait(record, tmp_path, hosted):
    """Three execs that fail (ENOEXEC) one right after another: each pause of the writer ends
    when the writer has honoured it (the next exec's pause came before the writer saw the last
    one lifted, and both sides waited 10 s), and the three blocks are recorded."""
    not_a_program = tmp_path / "not_a_program"
    not_a_program.write_bytes(b"\x00\x01\x02\x03")
    not_a_program.chmod(0o755)
    r = record("failed_execs", str(not_a_program),
               env=None if hosted else {"MEMLENS_HOSTED_WRITER": "0"})
    assert r.proc.returncode == 0, r.proc.stderr
    assert int(r.proc.stdout) < 2000
    row = r.row_at("failed_execs.c", "before_exec")
    assert (row["allocations"], row["leaked_bytes"]) == (3, 300)
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "exit" and summary["process"]["earlier_images"] == []


def test_a_shell_searching_path_does_not_wait_at_each_missing_entry(tmp_path):
    """sh tries /nx1/true, /nx2/true, /nx3/true, then /bin/true: the three that cannot run are
    no exec for the capture (no pause), and the one that runs is the next image."""
    capture = tmp_path / "sh.mlens"
    start = time.monotonic()
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", "/bin/sh", "-c",
                           "exec true"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": "/nx1:/nx2:/nx3:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - start < 5
    summary = Recorded(proc, capture).analyze("summary")
    assert summary["capture"]["end_reason"] == "exit"
    assert summary["process"]["earlier_images"] == [["/bin/sh", "-c", "exec true"]]


def test_exited_threads_give_their_buffers_back(record):
    r = record("many_threads", timeout=120)
    assert r.proc.returncode == 0
    growth_mib = int(r.proc.stdout)
    # Without recycling every thread would keep its ring (512 KiB under memlens run: 190 MiB and
    # more; 2 MiB inside the program). A few dozen
    # rings may wait for the writer to notice their threads have exited when the machine is
    # busy, so the bound leaves room for that and still fails without recycling.
    assert growth_mib < 128, f"address space grew {growth_mib} MiB over 380 short-lived threads"
    work = r.row_at("many_threads.c", "work")
    assert work["allocations"] == 400 * 1000 and work["leaked_bytes"] == 0
    # Threads are counted by OS thread id, which the kernel may give again to a later thread.
    assert 380 <= r.analyze("summary")["process"]["threads"] <= 401


def test_allocations_on_a_minimal_thread_stack(record):
    r = record("small_stack")
    assert r.proc.returncode == 0 and r.proc.stdout == "ok\n", r.proc.stderr
    row = r.row_at("small_stack.c", "small_stack")
    assert (row["allocations"], row["leaked_bytes"]) == (100, 10_000)
