"""Shared helpers for the end-to-end tests: run a test program under `memlens run`, analyze the
capture with `--json`, and find the lines the programs mark with `// @name` comments, so tests
assert exact bytes at exact source lines without hard-coding line numbers."""
import json
import os
import pathlib
import re
import signal
import subprocess
import time

import pytest

from interpreters import CACHE, TESTS_PYTHON, under_test

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MEMLENS_BUILD_DIR", REPO / "build"))
MEMLENS = BUILD / "bin" / "memlens"
PROGRAMS = BUILD / "tests" / "programs"
SOURCES = REPO / "tests" / "programs"
# `memlens run` indexes only captures past 2 MiB; the tests' captures are small, and their
# views are to be checked with the index as well (test_run_index.py checks the threshold).
os.environ["MEMLENS_INDEX_MIN_BYTES"] = "0"


def pytest_configure(config):
    config.addinivalue_line("markers", "interpreter: runs once under each Python under test "
                            "(the `python` fixture); ctest runs `-m interpreter` per interpreter")


def pytest_report_header():
    found = ", ".join(f"{i.tag} ({i})" for i in under_test())
    return [f"Pythons under test: {found}; tools/build-pythons builds 3.13, 3.14 and their "
            f"free-threaded builds into {CACHE}"]


def pytest_collection_modifyitems(items):
    for item in items:
        if "python" in getattr(item, "fixturenames", ()):
            item.add_marker("interpreter")


@pytest.fixture(scope="session", params=under_test(), ids=lambda i: f"py{i.tag}")
def python(request):
    """The interpreter under test (interpreters.py): every test that records Python takes it, and
    so runs once under each interpreter."""
    interpreter = request.param
    hooks = BUILD / "lib" / f"libmemlens_python{interpreter.tag}.so"
    # The tests' own Python without hooks is a build without its headers (the tests skip, saying
    # so); any other interpreter found here is one the build was to make hooks for.
    if interpreter.executable != TESTS_PYTHON and not hooks.exists():
        pytest.fail(f"no hooks for Python {interpreter.tag} ({interpreter}): {hooks} is missing; "
                    "configure with -DMEMLENS_PYTHONS=<its executable> (tools/test passes every "
                    "finished build under the cache)", pytrace=False)
    return interpreter


def line_of(source, marker, sources=SOURCES):
    """The line number of `// @marker` in tests/programs/<source> (or `sources`/<source>)."""
    for number, text in enumerate((sources / source).read_text().splitlines(), start=1):
        if re.search(r"// @" + re.escape(marker) + r"\b", text):
            return number
    raise AssertionError(f"no @{marker} in {source}")


class Recorded:
    sources = SOURCES  # where the programs' sources, with their `// @name` lines, are

    def __init__(self, proc, capture):
        self.proc = proc
        self.capture = capture

    def analyze(self, command, *args):
        out = subprocess.run([str(MEMLENS), command, str(self.capture), "--json", *args],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def rows_at(self, source, marker, *args):
        """`top --by line` rows whose site is the marked line of the source."""
        line = line_of(source, marker, self.sources)
        rows = self.analyze("top", "--by", "line", "--limit", "100000", *args)["rows"]
        return [r for r in rows
                if r["site"]["file"].endswith("/" + source) and r["site"]["line"] == line]

    def row_at(self, source, marker, *args):
        rows = self.rows_at(source, marker, *args)
        assert len(rows) == 1, f"expected one row at {source}:@{marker}, got {rows}"
        return rows[0]


@pytest.fixture
def record(tmp_path):
    """record(program, *args, stdin=None, timeout=60, env=None) -> Recorded; runs it under
    memlens, with `env` added to the environment."""
    def run(program, *args, stdin=None, timeout=60, cwd=None, env=None):
        capture = tmp_path / f"{program}.mlens"
        proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--",
                               str(PROGRAMS / program), *args],
                              input=stdin, capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or tmp_path, env={**os.environ, **env} if env else None)
        return Recorded(proc, capture)
    return run


def package_environment(**extra):
    """A program's environment for the Python package without `memlens run`: no preloaded
    agent, the source tree's memlens package and the build's test modules, `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MEMLENS_OUTPUT")}
    env.update(PYTHONPATH=os.pathsep.join([str(REPO / "src" / "python"),
                                           str(BUILD / "tests" / "python")]),
               MEMLENS_BUILD_DIR=str(BUILD), **extra)
    return env


def memlens(*args, **kwargs):
    return subprocess.run([str(MEMLENS), *map(str, args)], capture_output=True, text=True,
                          timeout=kwargs.pop("timeout", 120), **kwargs)


def record_killed(capture, before_kill=None, program="wait_for_kill", settle=0.5, env=None):
    """Runs `program` (wait_for_kill) under `memlens run -o capture`, SIGKILLs it once it has
    said "ready" and `settle` seconds have passed (calling before_kill() first, when given), and
    returns the finished `memlens run` Popen. `env` is added to the environment."""
    proc = subprocess.Popen([str(MEMLENS), "run", "-o", str(capture), "--",
                             str(PROGRAMS / program)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env} if env else None)
    assert proc.stdout.readline() == "ready\n"
    time.sleep(settle)  # an in-process writer flushes at least every 100 ms
    path = str(PROGRAMS / program).encode()
    program = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if cmdline.read().startswith(path + b"\0"):
                    program.append(int(pid))
        except OSError:
            pass  # a process that exited meanwhile
    assert len(program) == 1
    if before_kill:
        before_kill()
    os.kill(program[0], signal.SIGKILL)
    assert proc.wait(timeout=30) == 128 + signal.SIGKILL
    return proc
