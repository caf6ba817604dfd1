"""The live view (issue 29, "Live"; docs/live.md): `memlens live CAPTURE` and `memlens run
--live`, driven in a real terminal (tmux). While the program still runs the view shows its known
figure (3 x 10,000 bytes at keep_block's line); a snapshot or marker asked from the view (keys n
and m, through `memlens mark`) lands in the capture and names the moment afterwards, exact;
quitting the view leaves the program running and the capture whole."""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import MEMLENS, PROGRAMS, line_of, memlens

TARGET = PROGRAMS / "attach_target"
TMUX = shutil.which("tmux")


def yama_scope():
    try:
        return int(open("/proc/sys/kernel/yama/ptrace_scope").read())
    except OSError:
        return 0


pytestmark = pytest.mark.skipif(TMUX is None and not os.environ.get("CI"),
                                reason="tmux is not installed (CI installs it: .ci/run)")
# Markers and snapshots asked from outside trace the program (memlens mark): under Yama's
# ptrace_scope >= 1 only root may, from `memlens live` or a shell. CI runs as root.
needs_tracing = pytest.mark.skipif(os.geteuid() != 0 and yama_scope() >= 1,
                                   reason="kernel.yama.ptrace_scope >= 1: only root may trace "
                                   "the program from outside (CI runs these tests as root)")


class Terminal:
    """A tmux session of its own (its own server socket) running one shell command."""

    def __init__(self, command, width=150, height=40):
        self.socket = f"memlens-test-{uuid.uuid4().hex[:8]}"
        subprocess.run([TMUX, "-L", self.socket, "new-session", "-d", "-x", str(width), "-y",
                        str(height), command], check=True)

    def screen(self):
        out = subprocess.run([TMUX, "-L", self.socket, "capture-pane", "-p"],
                             capture_output=True, text=True)
        return out.stdout

    def keys(self, *keys):
        subprocess.run([TMUX, "-L", self.socket, "send-keys", *keys], check=True)

    def wait_for(self, *texts, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"never showed {texts}:\n{self.screen()}")

    def close(self):
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def terminal():
    opened = []

    def open_terminal(command):
        opened.append(Terminal(command))
        return opened[-1]
    yield open_terminal
    for t in opened:
        t.close()


class Server:
    """attach_target under `memlens run`, its stdin and stdout ours."""

    def __init__(self, capture):
        self.proc = subprocess.Popen([str(MEMLENS), "run", "-o", str(capture), "--", str(TARGET)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "ready\n"

    def ask(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline()

    def program_pid(self):
        return int(subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                                  text=True).stdout.split()[0])

    def finish(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        out = self.proc.stdout.read()
        return out, self.proc.wait(timeout=60)


def in_use_at_keep_line(capture_argument):
    out = memlens("top", capture_argument, "--by", "line", "--json", "--limit", "1000")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    keep = line_of("attach_target.c", "keep_block")
    return sum(r["leaked_bytes"] for r in rows if r["site"]["line"] == keep
               and r["site"]["file"].endswith("attach_target.c"))


KEEP_SITE = f"attach_target.c:{line_of('attach_target.c', 'keep_block')}"


@needs_tracing
def test_live_view_shows_the_running_figure_and_a_snapshot_asked_from_it_lands(tmp_path,
                                                                               terminal):
    capture = tmp_path / "server.mlens"
    server = Server(capture)
    assert server.ask("work") == "worked 3\n"
    view = terminal(f"{MEMLENS} live {capture}; echo VIEW-CLOSED-$?; sleep 600")
    view.wait_for("recording", "29.30 KiB", KEEP_SITE)
    view.keys("n")  # a snapshot, named live-1 by default
    view.wait_for("snapshot name: live-1")
    view.keys("Enter")
    view.wait_for("snapshot 'live-1' added to process")
    deadline = time.monotonic() + 30  # the markers line shows it at the next load
    while not any(l.startswith("markers   |") and "S" in l for l in view.screen().splitlines()):
        assert time.monotonic() < deadline, view.screen()
        time.sleep(0.1)
    assert server.ask("work") == "worked 6\n"
    view.wait_for("58.59 KiB")  # 6 x 10,000 in use now, while the program runs
    view.keys("q")
    view.wait_for("VIEW-CLOSED-0")
    assert server.proc.poll() is None  # the program runs on
    out, status = server.finish()
    assert (out, status) == ("bye 2100\n", 0)
    assert in_use_at_keep_line(f"{capture}@snapshot:live-1") == 30000
    assert in_use_at_keep_line(f"{capture}@end") == 0


def test_run_live_draws_while_the_program_runs_and_a_marker_lands(tmp_path, terminal):
    capture, fifo = tmp_path / "live.mlens", tmp_path / "in"
    output, errors = tmp_path / "out.txt", tmp_path / "err.txt"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # held open: the program reads until we close it
    view = terminal(f"{MEMLENS} run --live -o {capture} -- {TARGET} < {fifo} > {output} 2> {errors}; "
                    "echo RUN-EXIT-$?; sleep 600")
    try:
        view.wait_for("recording")
        os.write(writer, b"work\n")
        view.wait_for("29.30 KiB", KEEP_SITE)
        view.keys("m")
        view.wait_for("marker name: live-1")
        view.keys("Enter")
        view.wait_for("marker 'live-1' added to process")
        os.write(writer, b"work\n")
        view.wait_for("58.59 KiB")
        view.keys("q")  # the view closes; memlens run goes on waiting for its program
        deadline = time.monotonic() + 30
        while "Top sites by" in view.screen():
            assert time.monotonic() < deadline, view.screen()
            time.sleep(0.1)
        assert "RUN-EXIT" not in view.screen()
        running = subprocess.run(["pgrep", "-f", f"^{MEMLENS} run --live -o {capture}"],
                                 capture_output=True)
        assert running.returncode == 0  # memlens run, and so its program, still there
        os.write(writer, b"quit\n")
        view.wait_for("RUN-EXIT-0")
    finally:
        os.close(writer)
    assert output.read_text() == "ready\nworked 3\nworked 6\nbye 2100\n"
    assert errors.read_text() == f"memlens: capture written to {capture}\n"
    assert in_use_at_keep_line(f"{capture}@marker:live-1") == 30000


def test_run_live_shows_the_end_and_waits_for_q(tmp_path, terminal):
    capture = tmp_path / "ended.mlens"
    view = terminal(f"echo quit | {MEMLENS} run --live -o {capture} -- {TARGET} > /dev/null 2>&1; "
                    "echo RUN-EXIT-$?; sleep 600")
    view.wait_for("ended (exit)", "the program has ended: q closes the view")
    view.keys("q")
    view.wait_for("RUN-EXIT-0")


def test_run_live_refuses_a_program_that_uses_the_terminal(terminal):
    view = terminal(f"{MEMLENS} run --live -- {TARGET}; echo RUN-EXIT-$?; sleep 600")
    screen = view.wait_for("RUN-EXIT-2")
    assert ("memlens: --live draws on this terminal, which the program would use too (its "
            "standard input is a terminal)") in screen.replace("\n", "")


def test_live_once_prints_a_frame_without_a_terminal(tmp_path):
    capture = tmp_path / "once.mlens"
    server = Server(capture)
    assert server.ask("work") == "worked 3\n"
    deadline = time.monotonic() + 30
    while True:  # the agent writes a chunk at least every 100 ms
        out = memlens("live", capture, "--once", "--width", "120")
        if "29.30 KiB" in out.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"memlens live  {TARGET}  (pid {server.program_pid()})")
    assert lines[0].endswith("recording")
    assert any(KEEP_SITE in l and l.split()[:2] == ["29.30", "KiB"] for l in lines), out.stdout
    assert server.finish() == ("bye 600\n", 0)


@needs_tracing
def test_mark_from_the_shell_and_its_refusals(tmp_path):
    capture = tmp_path / "marked.mlens"
    server = Server(capture)
    assert server.ask("work") == "worked 3\n"
    pid = server.program_pid()
    out = memlens("mark", pid, "after-work")
    assert out.returncode == 0, out.stderr
    assert out.stderr == (f"memlens: marker 'after-work' added to process {pid} (attach_target): "
                          "CAPTURE@marker:after-work names it\n")
    assert server.ask("work") == "worked 6\n"
    assert server.finish() == ("bye 2100\n", 0)
    assert in_use_at_keep_line(f"{capture}@marker:after-work") == 30000
    plain = subprocess.Popen([str(TARGET)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert plain.stdout.readline() == "ready\n"
    refused = memlens("mark", plain.pid, "x")
    assert refused.returncode == 2 and refused.stderr == (
        f"memlens: mark: memlens is not loaded in process {plain.pid} (attach_target): it was "
        "never attached\n")
    plain.stdin.close()
    assert plain.wait(timeout=30) == 3


def test_run_live_ends_by_itself_when_a_signal_ended_the_program(tmp_path, terminal):
    """SIGTERM to memlens run goes on to the program; the view then closes by itself (nobody is
    there to press q) and memlens run exits as its program did, with the terminal put back."""
    capture, fifo = tmp_path / "term.mlens", tmp_path / "in"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)
    view = terminal(f"{MEMLENS} run --live -o {capture} -- {TARGET} < {fifo} > /dev/null "
                    "2>&1; echo RUN-EXIT-$?; stty -a | grep -o -- '-icanon' || echo COOKED; "
                    "sleep 600")
    try:
        view.wait_for("recording")
        run = subprocess.run(["pgrep", "-f", f"^{MEMLENS} run --live -o {capture}"], capture_output=True,
                             text=True).stdout.split()
        os.kill(int(run[0]), signal.SIGTERM)
        screen = view.wait_for("RUN-EXIT-143", "COOKED")
    finally:
        os.close(writer)
    assert "Top sites by" not in screen  # the alternate screen is gone
