"""The agent never harms the program and keeps recording (issue 25): a program that closes every
descriptor it inherited, one that runs out of memory, one killed by a fatal signal, and the
capture's privacy. Each compares the program's own output and exit status with a run without
memlens, and the capture's counts with the program's own."""
import os
import resource
import signal
import subprocess

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, memlens


def run_plain(program, *args, cwd=None, **kwargs):
    return subprocess.run([str(PROGRAMS / program), *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, **kwargs)


@pytest.mark.parametrize("how", ["loop", "closefrom", "close_range", "dup2", "raw", "raw in-process"])
def test_closing_every_descriptor_keeps_the_capture_out_of_the_program_files(
        record, tmp_path, how):
    """"raw in-process": the writer inside the program (MEMLENS_HOSTED_WRITER=0, as under plain
    LD_PRELOAD), whose descriptor a raw close takes away; memlens run's own writer keeps its."""
    in_process = how.endswith(" in-process")
    how = how.split()[0]
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    plain = run_plain("closes_descriptors", how, cwd=plain_dir)
    r = record("closes_descriptors", how, env={"MEMLENS_HOSTED_WRITER": "0"} if in_process else None)
    assert (r.proc.returncode, r.proc.stdout) == (plain.returncode, plain.stdout)
    assert r.proc.stdout == "files intact\n"
    before = r.row_at("closes_descriptors.c", "before_close")
    after = r.row_at("closes_descriptors.c", "after_close")
    assert (before["allocations"], before["leaked_bytes"]) == (100, 100 * 1000)
    assert (after["allocations"], after["leaked_bytes"]) == (100, 100 * 2000)
    assert r.analyze("summary")["capture"]["complete"]
    # A raw system call gets past the interposers: the writer in the program notices and
    # reopens, once.
    assert r.proc.stderr.count("opened the capture again") == (1 if in_process else 0)


def test_python_closerange_keeps_the_capture_out_of_its_file(tmp_path, python):
    script = ("import os, time\n"
              "os.closerange(3, 65536)\n"
              "f = open('own.txt', 'w'); f.write('program data\\n'); f.flush()\n"
              "time.sleep(0.3); f.write('more\\n'); f.close()\n"
              "print(open('own.txt').read(), end='')\n")
    capture = tmp_path / "py.mlens"
    proc = memlens("run", "-o", capture, "--", python, "-c", script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "program data\nmore\n"
    summary = Recorded(proc, capture).analyze("summary")
    assert summary["capture"]["complete"] and summary["totals"]["allocations"] > 0


def limit_address_space(kib):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (kib * 1024, kib * 1024))
    return apply


def test_out_of_memory_program_copes_and_is_recorded_to_the_end(tmp_path):
    """Under ulimit -v the program fills memory with 100 kB blocks until malloc returns NULL,
    makes 20000 malloc/free pairs in the room of one block, then frees everything: the agent
    must neither abort (its writer's own allocation failed, and aborted about one run in two)
    nor lose an event. Four runs, each compared with one without memlens."""
    limit = limit_address_space(200000)
    plain = run_plain("out_of_memory", "100000", "20000", preexec_fn=limit)
    assert plain.returncode == 0
    # Only the program runs under the limit: `memlens run` and its indexer do not.
    env = {**os.environ, "LD_PRELOAD": str(MEMLENS.parent.parent / "lib" / "libmemlens.so")}
    for run in range(4):
        capture = tmp_path / f"oom{run}.mlens"
        proc = subprocess.run([str(PROGRAMS / "out_of_memory"), "100000", "20000"],
                              capture_output=True, text=True, timeout=120,
                              env={**env, "MEMLENS_OUTPUT": str(capture)}, preexec_fn=limit)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        count = int(proc.stdout.split()[0])
        # The agent's own address space is what the program gets fewer blocks of.
        assert proc.stdout == f"{count} blocks\n" and count > 0.5 * int(plain.stdout.split()[0])
        r = Recorded(proc, capture)
        blocks = r.row_at("out_of_memory.c", "until_null")
        assert (blocks["allocations"], blocks["leaked_bytes"]) == (count, 0)
        small = r.row_at("out_of_memory.c", "small")
        assert (small["allocations"], small["leaked_bytes"]) == (20000, 0)
        summary = r.analyze("summary")
        assert summary["capture"]["complete"] and summary["totals"]["dropped_events"] == 0


def wait_status(returncode):
    """subprocess's returncode of a program, as `memlens run` reports it."""
    return 128 - returncode if returncode < 0 else returncode


def test_sigpipe_keeps_every_event_made_before_it(tmp_path):
    """`prog | head -1`: the reader goes away, the program allocates 1000 blocks and dies of
    SIGPIPE on its next write. Every one of them is in the capture."""
    capture = tmp_path / "pipe.mlens"
    results = []
    for command in ([str(PROGRAMS / "fatal_signals"), "pipe"],
                    [str(MEMLENS), "run", "-o", str(capture), "--",
                     str(PROGRAMS / "fatal_signals"), "pipe"]):
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, restore_signals=True)
        assert proc.stdout.readline() == "ready\n"
        proc.stdout.close()  # as head -1 does
        results.append(proc.wait(timeout=60))
        proc.stderr.close()
    assert results[0] == -signal.SIGPIPE
    assert results[1] == wait_status(results[0])
    r = Recorded(None, capture)
    row = r.row_at("fatal_signals.c", "before_signal")
    assert (row["allocations"], row["leaked_bytes"]) == (1000, 48 * 1000)
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "signal"


def test_yes_piped_into_head_is_recorded_to_its_death(tmp_path):
    """`yes | head -1` recorded nothing: yes dies of SIGPIPE with its events unwritten."""
    capture = tmp_path / "yes.mlens"
    proc = subprocess.run(["sh", "-c", f"{MEMLENS} run -o {capture} -- yes | head -1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout == "y\n"
    summary = Recorded(proc, capture).analyze("summary")
    assert summary["capture"]["end_reason"] == "signal"
    assert summary["totals"]["allocations"] > 0


@pytest.mark.parametrize("how, signo", [("term", signal.SIGTERM), ("usr1", signal.SIGUSR1)])
def test_death_by_raised_signal_keeps_every_event(record, how, signo):
    plain = run_plain("fatal_signals", how)
    assert plain.returncode == -signo
    r = record("fatal_signals", how)
    assert r.proc.returncode == 128 + signo
    row = r.row_at("fatal_signals.c", "before_signal")
    assert (row["allocations"], row["leaked_bytes"]) == (1000, 48 * 1000)
    assert r.analyze("summary")["capture"]["end_reason"] == "signal"


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_the_program_sees_its_own_signal_dispositions(record, inherited):
    """A query sees SIG_DFL where the agent stands in; setting a handler replaces it, setting
    SIG_DFL again reads back as set; SIGPIPE ignored by the parent stays ignored."""
    restore = inherited == "default"  # Python ignores SIGPIPE; restore_signals undoes that
    plain = subprocess.run([str(PROGRAMS / "fatal_signals"), "query"], capture_output=True,
                           text=True, timeout=60, restore_signals=restore)
    with_memlens = subprocess.run([str(MEMLENS), "run", "-o", "/dev/null", "--",
                                   str(PROGRAMS / "fatal_signals"), "query"],
                                  capture_output=True, text=True, timeout=60,
                                  restore_signals=restore)
    assert with_memlens.returncode == plain.returncode == 0
    assert with_memlens.stdout == plain.stdout
    assert ("PIPE ignored" in plain.stdout) == (inherited == "ignored")


def test_capture_and_index_are_private(record):
    r = record("known_peak")
    assert r.proc.returncode == 0
    assert oct(r.capture.stat().st_mode & 0o777) == oct(0o600)
    index = r.capture.parent / (r.capture.name + ".index")
    assert index.exists()
    assert oct(index.stat().st_mode & 0o777) == oct(0o600)


def test_symlink_at_the_output_path_is_not_followed(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = tmp_path / "capture.mlens"
    link.symlink_to(target)
    proc = memlens("run", "-o", link, "--", PROGRAMS / "known_peak")
    assert proc.returncode == 2
    assert "is a symbolic link" in proc.stderr
    assert target.read_text() == "keep me\n"
    # The agent preloaded by hand refuses too, and the program runs on unrecorded.
    plain = run_plain("known_peak")
    env = {**os.environ, "LD_PRELOAD": str(MEMLENS.parent.parent / "lib" / "libmemlens.so"),
           "MEMLENS_OUTPUT": str(link)}
    proc = subprocess.run([str(PROGRAMS / "known_peak")], capture_output=True, text=True,
                          timeout=60, env=env)
    assert (proc.returncode, proc.stdout) == (plain.returncode, plain.stdout)
    assert "is a symbolic link" in proc.stderr and "not recording" in proc.stderr
    assert target.read_text() == "keep me\n"
