"""Helpers shared by the benchmark runners (suite.py and the single-purpose scripts): run a
command and measure its wall time, CPU time and peak RSS, time an analyzer, shorten an error
line for a table."""
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

TIMEOUT_S = 300
TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def run(cmd, log, timeout=TIMEOUT_S):
    """Runs cmd (stdout+stderr to log). Returns (rc, wall s, peak RSS KiB of the largest process).
    See run_with_cpu."""
    rc, wall, _, rss = run_with_cpu(cmd, log, timeout)
    return rc, wall, rss


def run_with_cpu(cmd, log, timeout=TIMEOUT_S):
    """As run, plus the CPU seconds (user + system) of the whole process tree, threads included:
    returns (rc, wall s, cpu s, peak RSS KiB). On a loaded machine CPU time varies far less
    than wall time, since it does not count the time spent waiting for a core.

    ru_maxrss from wait4 is the largest single process of the command's tree, not a sum. It
    also counts the image that exec'd the child (this Python process), so when GNU time is
    there it is the one to fork and report (its own image is ~2 MiB).
    """
    rss_file = Path(f"{log}.rss")
    if TIME:
        cmd = [TIME, "-f", "%M", "-o", str(rss_file)] + cmd
    with open(log, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        timer.cancel()
    words = rss_file.read_text().split() if TIME and rss_file.exists() else []
    rss = int(words[-1]) if words else usage.ru_maxrss  # GNU time writes nothing when killed
    cpu = usage.ru_utime + usage.ru_stime  # wait4 counts the descendants each process reaped
    return os.waitstatus_to_exitcode(status), wall, cpu, rss


def timed(cmd, env=None):
    """Runs an analyzer; returns (rc, wall s, stdout, stderr)."""
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return -1, time.perf_counter() - start, "", f"timed out after {TIMEOUT_S} s"
    return proc.returncode, time.perf_counter() - start, proc.stdout, proc.stderr


def tail(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][:80].replace("|", "/") if lines else ""
