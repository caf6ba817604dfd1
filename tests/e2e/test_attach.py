"""`memlens attach PID` and `memlens detach PID` (issue 29, "Attach"; docs/attach.md): a native
server and a Python program recorded from the middle of their run, exact bytes at their lines
after the attach, nothing of before it or after the detach, and the program's output and exit
status what they are without memlens. Every refusal is one line and leaves the process running
as before: no such process, a thread's id, another user, an untraceable process, another
tracer, a static program, a process memlens run records whole."""
import ctypes
import json
import os
import shutil
import signal
import subprocess
import textwrap
import time

import pytest

from conftest import PROGRAMS, line_of, memlens

TARGET = PROGRAMS / "attach_target"
NOBODY = 65534


def yama_scope():
    try:
        return int(open("/proc/sys/kernel/yama/ptrace_scope").read())
    except OSError:
        return 0


# Yama's ptrace_scope 1 (Ubuntu's default) lets only root, or a process's ancestors, trace it:
# as another user these tests cannot attach at all. CI runs them as root, where they run.
pytestmark = pytest.mark.skipif(os.geteuid() != 0 and yama_scope() >= 1,
                                reason="kernel.yama.ptrace_scope >= 1 lets only root attach "
                                "here (CI runs these tests as root)")


class Server:
    """A program answering one line per command on stdin (attach_target.c's protocol)."""

    def __init__(self, command, **kwargs):
        self.proc = subprocess.Popen([str(c) for c in command], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     **kwargs)
        self.lines = [self.proc.stdout.readline()]
        assert self.lines == ["ready\n"], self.proc.stderr.read()
        self.pid = self.proc.pid

    def ask(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        self.lines.append(self.proc.stdout.readline())
        return self.lines[-1]

    def finish(self):
        """Sends quit; the whole output, stderr and the exit status."""
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        out = self.proc.stdout.read()
        err = self.proc.stderr.read()
        return "".join(self.lines) + out, err, self.proc.wait(timeout=30)


def analyze(capture, command, *args):
    out = memlens(command, capture, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def unattached_output(commands):
    server = Server([TARGET])
    for command in commands:
        server.ask(command)
    return server.finish()


def test_a_native_server_attached_mid_run_has_exact_bytes_and_runs_on_unchanged(tmp_path):
    capture = tmp_path / "server.mlens"
    server = Server([TARGET])
    attached = memlens("attach", server.pid, "-o", capture, timeout=60)
    assert attached.returncode == 0, attached.stderr
    assert f"recording process {server.pid} (attach_target) into {capture}" in attached.stderr
    assert server.ask("work") == "worked 3\n"
    detached = memlens("detach", server.pid, timeout=60)
    assert detached.returncode == 0, detached.stderr
    assert server.ask("work") == "worked 6\n"  # not recorded: after the detach
    assert server.finish() == unattached_output(["work", "work"])

    summary = analyze(capture, "summary")
    assert summary["capture"]["end_reason"] == "stopped"
    totals = summary["totals"]
    # 3 x 10,000 kept and 5,000 freed at once; the two blocks of before the attach are freed
    # inside it: unmatched frees, not counted.
    assert (totals["allocations"], totals["allocated_bytes"], totals["frees"]) == (4, 35000, 1)
    assert (totals["in_use_at_exit_bytes"], totals["peak_bytes"]) == (30000, 35000)
    assert totals["unmatched_frees"] == 2
    rows = analyze(capture, "top", "--by", "line", "--limit", "1000")["rows"]
    by_line = {r["site"]["line"]: (r["allocated_bytes"], r["leaked_bytes"]) for r in rows
               if r["site"]["file"].endswith("attach_target.c")}
    assert by_line == {line_of("attach_target.c", "keep_block"): (30000, 30000),
                       line_of("attach_target.c", "temporary_block"): (5000, 0)}


def test_duration_detaches_by_itself_and_the_capture_is_complete(tmp_path):
    capture = tmp_path / "timed.mlens"
    server = Server([TARGET])
    attach = subprocess.Popen([str(PROGRAMS.parents[1] / "bin" / "memlens"), "attach",
                               str(server.pid), "-o", str(capture), "--duration", "3"],
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not capture.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.ask("work") == "worked 3\n"
    assert attach.wait(timeout=60) == 0
    stderr = attach.stderr.read()
    assert "detached; the capture is complete" in stderr, stderr
    assert server.ask("work") == "worked 6\n"
    assert server.finish() == unattached_output(["work", "work"])
    totals = analyze(capture, "summary")["totals"]
    assert (totals["allocated_bytes"], totals["in_use_at_exit_bytes"]) == (35000, 30000)


def test_the_process_ending_while_attached_ends_the_capture(tmp_path):
    capture = tmp_path / "ended.mlens"
    server = Server([TARGET])
    assert memlens("attach", server.pid, "-o", capture).returncode == 0
    server.ask("work")
    output, _, status = server.finish()
    assert (output, status) == ("ready\nworked 3\nbye 600\n", 0)
    summary = analyze(capture, "summary")
    assert summary["capture"]["end_reason"] == "exit"
    assert summary["totals"]["allocated_bytes"] == 35000
    assert summary["totals"]["in_use_at_exit_bytes"] == 0  # quit freed the kept blocks
    gone = memlens("detach", server.pid)
    assert gone.returncode != 0 and gone.stderr == f"memlens: detach: no process {server.pid}\n"


PYTHON_SERVER = textwrap.dedent("""\
    import sys
    kept = []
    print("ready", flush=True)
    for line in sys.stdin:
        if line == "work\\n":
            kept.append(bytearray(100000))  # @keep
            print("worked", len(kept), flush=True)
        elif line == "quit\\n":
            print("bye", sum(len(k) for k in kept), flush=True)
            break
    """)


def test_a_python_program_attached_mid_run_has_its_lines(python, tmp_path):
    script = tmp_path / "server.py"
    script.write_text(PYTHON_SERVER)
    keep_line = next(n for n, text in enumerate(PYTHON_SERVER.splitlines(), 1) if "@keep" in text)
    capture = tmp_path / "python.mlens"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLENS", "LD_PRELOAD"))}
    server = Server([python.executable, script], env=env)
    attached = memlens("attach", server.pid, "-o", capture, timeout=60)
    assert attached.returncode == 0, attached.stderr
    assert server.ask("work") == "worked 1\n"
    assert memlens("detach", server.pid, timeout=60).returncode == 0
    assert server.ask("work") == "worked 2\n"
    output, err, status = server.finish()
    assert (output, err, status) == ("ready\nworked 1\nworked 2\nbye 200000\n", "", 0)
    # bytearray(100000) holds 100,001 bytes; the one made after the detach is not there.
    blocks = analyze(f"{capture}@end", "blocks")
    stacks = {s["id"]: s["frames"] for s in blocks["stacks"]}
    buffers = [b for b in blocks["blocks"] if b["size"] == 100001]
    assert len(buffers) == 1
    python_frames = [f for f in stacks[buffers[0]["stack"]] if f["python"]]
    assert (python_frames[0]["file"], python_frames[0]["line"]) == (str(script), keep_line)


def refused(command, *args, **kwargs):
    """memlens's one-line refusal (its exit status non-zero)."""
    out = subprocess.run([str(PROGRAMS.parents[1] / "bin" / "memlens"), command, *map(str, args)],
                         capture_output=True, text=True, timeout=60, **kwargs)
    assert out.returncode != 0 and out.stdout == ""
    assert out.stderr.count("\n") == 1, out.stderr
    return out.stderr


def assert_runs_on(server):
    assert server.ask("work") == "worked 3\n"
    assert server.finish() == unattached_output(["work"])


def test_refusals_for_what_is_not_a_process_we_may_attach(tmp_path):
    assert refused("attach", 999999999) == "memlens: attach: no process 999999999\n"
    assert refused("attach", 0) == "memlens: attach: 0 is not a process id\n"
    server = Server([TARGET])
    assert refused("detach", server.pid) == (
        f"memlens: detach: memlens is not loaded in process {server.pid} (attach_target): it "
        "was never attached\n")
    assert_runs_on(server)


def test_a_thread_id_is_refused_with_its_process(tmp_path):
    script = tmp_path / "threads.py"
    script.write_text("import threading, time, sys\n"
                      "t = threading.Thread(target=time.sleep, args=(30,), daemon=True)\n"
                      "t.start()\nprint(t.native_id, flush=True)\nsys.stdin.read()\n")
    proc = subprocess.Popen([shutil.which("python3"), str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    tid = int(proc.stdout.readline())
    assert refused("attach", tid) == (
        f"memlens: attach: {tid} is a thread of process {proc.pid}: give the process's id\n")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def drop_to_nobody():
    os.setgid(NOBODY)
    os.setgroups([])
    os.setuid(NOBODY)


def untraceable():
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0


def test_tracing_not_allowed_is_one_line_and_the_process_runs_on(tmp_path):
    """As root, memlens runs as another user than the process's; otherwise the process makes
    itself untraceable (prctl), which the kernel refuses as Yama's ptrace_scope would."""
    if os.geteuid() == 0:
        server = Server([TARGET])
        why = refused("attach", server.pid, "-o", tmp_path / "x.mlens",
                      preexec_fn=drop_to_nobody, cwd="/")
        assert why == (f"memlens: attach: process {server.pid} (attach_target) belongs to root "
                       "(uid 0) and memlens runs as nobody (uid 65534): only the process's "
                       "owner, or root, can attach\n")
    else:
        server = Server([TARGET], preexec_fn=untraceable)
        why = refused("attach", server.pid, "-o", tmp_path / "x.mlens")
        assert why.startswith(f"memlens: attach: the kernel refused to let memlens trace "
                              f"process {server.pid} (attach_target) (Operation not permitted): "
                              "the process may have made itself untraceable"), why
    assert not (tmp_path / "x.mlens").exists()
    assert_runs_on(server)


def test_a_process_with_a_tracer_is_refused(tmp_path):
    server = Server([TARGET])
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.ptrace(0x4206, server.pid, None, None) == 0, os.strerror(ctypes.get_errno())
    try:
        why = refused("attach", server.pid)
        assert why.startswith(f"memlens: attach: process {server.pid} (attach_target) is "
                              f"already traced by process {os.getpid()}"), why
    finally:  # a seized tracee is detached from a stop: interrupt it, wait, detach
        assert libc.ptrace(0x4207, server.pid, None, None) == 0  # PTRACE_INTERRUPT
        os.waitpid(server.pid, 0x40000000)  # __WALL
        assert libc.ptrace(17, server.pid, None, None) == 0  # PTRACE_DETACH
    assert tracer_of(server.pid) == 0
    assert_runs_on(server)


def tracer_of(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    raise AssertionError("no TracerPid")


def state_of(pid):
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]


def test_a_static_program_is_refused(tmp_path):
    compiler = shutil.which("cc") or shutil.which("gcc")
    source = tmp_path / "static.c"
    source.write_text("#include <unistd.h>\nint main(void) { char c; return read(0, &c, 1); }\n")
    program = tmp_path / "static_program"
    subprocess.run([compiler, "-static", "-O1", source, "-o", program], check=True)
    proc = subprocess.Popen([program], stdin=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while open(f"/proc/{proc.pid}/comm").read() != "static_program\n":  # exec'd
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert refused("attach", proc.pid) == (
        f"memlens: attach: process {proc.pid} (static_program) is statically linked (no dynamic "
        "loader in it): memlens is loaded by the program's own dynamic loader, which a static "
        "program does not have\n")
    proc.stdin.write(b"x")
    proc.stdin.close()
    assert proc.wait(timeout=30) == 1


def test_a_process_memlens_run_records_is_refused_by_its_agent(tmp_path):
    run = Server([PROGRAMS.parents[1] / "bin" / "memlens", "run", "-o", tmp_path / "run.mlens",
                  "--", TARGET])
    pid = int(subprocess.run(["pgrep", "-P", str(run.pid)], capture_output=True,
                             text=True).stdout.split()[0])
    why = refused("attach", pid, "-o", tmp_path / "attach.mlens")
    assert why == (f"memlens: attach: process {pid} (attach_target) did not start recording: "
                   "this process is already recorded whole, from its start, by memlens run (the "
                   "agent is preloaded): no span can start; the whole capture goes on\n")
    assert run.ask("work") == "worked 3\n"
    output, _, status = run.finish()
    assert (output, status) == ("ready\nworked 3\nbye 600\n", 0)
    totals = analyze(tmp_path / "run.mlens", "summary")["totals"]
    rows = analyze(tmp_path / "run.mlens", "top", "--by", "line", "--limit", "1000")["rows"]
    kept = [r for r in rows if r["site"]["line"] == line_of("attach_target.c", "keep_block")]
    assert kept[0]["allocated_bytes"] == 30000 and totals["dropped_events"] == 0


def test_a_stopped_process_is_refused_until_continued(tmp_path):
    server = Server([TARGET])
    os.kill(server.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 30
    while state_of(server.pid) != "T":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert refused("attach", server.pid) == (
            f"memlens: attach: process {server.pid} (attach_target) is stopped (SIGSTOP or "
            f"Ctrl-Z): continue it first (kill -CONT {server.pid})\n")
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert_runs_on(server)


def test_the_agents_warnings_go_to_memlens_not_to_the_programs_stderr(tmp_path):
    """A Python process attached with an agent that has no hooks library for it: the agent's
    one-line warning is memlens attach's to say; the program's stderr stays its own, empty."""
    lonely = tmp_path / "lib"
    lonely.mkdir()
    shutil.copy(PROGRAMS.parents[1] / "lib" / "libmemlens.so", lonely / "libmemlens.so")
    script = tmp_path / "server.py"
    script.write_text(PYTHON_SERVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLENS", "LD_PRELOAD"))}
    server = Server([shutil.which("python3"), script], env=env)
    capture = tmp_path / "quiet.mlens"
    attached = memlens("attach", server.pid, "-o", capture,
                       env={**os.environ, "MEMLENS_AGENT": str(lonely / "libmemlens.so")})
    assert attached.returncode == 0, attached.stderr
    warning = attached.stderr.splitlines()[1]  # after "recording ... into ..."
    assert warning.startswith(f"memlens: process {server.pid} (python3): Python 3."), warning
    assert "is not supported by this memlens build" in warning
    assert server.ask("work") == "worked 1\n"
    assert memlens("detach", server.pid).returncode == 0
    output, err, status = server.finish()
    assert (output, err, status) == ("ready\nworked 1\nbye 100000\n", "", 0)
