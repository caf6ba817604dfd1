"""`pip install .` in a fresh virtual environment gives a working memlens: the console script,
`python3 -m memlens`, and Python frames from the installed hooks. Slow (a full build inside
pip), so it runs once and checks everything on the one installation, under the Python running the
tests only: a wheel for another interpreter would rebuild all of memlens (minutes each) to differ
only by its hooks library, which the other Python tests check under every interpreter."""
import os
import re
import subprocess
import sys
import textwrap
import venv

import pytest

from conftest import REPO, Recorded

SCRIPTS = REPO / "tests" / "python" / "scripts"


def source_version():
    text = (REPO / "src" / "python" / "memlens" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([0-9.]+)"$', text, re.M).group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if os.environ.get("MEMLENS_SKIP_PIP_TEST"):
        pytest.skip("MEMLENS_SKIP_PIP_TEST is set (a developer's quick run); CI runs this test")
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(REPO)],
                          capture_output=True, text=True, timeout=1200, cwd=env_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return env_dir


def test_console_script_and_module_help(installed):
    for command in ([str(installed / "bin" / "memlens"), "--help"],
                    [str(installed / "bin" / "python"), "-m", "memlens", "--help"]):
        proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "summary" in proc.stdout and "run" in proc.stdout


def test_one_version_everywhere(installed):
    """__init__.py's __version__ is the one source: the wheel's metadata and the executable's
    --version read it at build time."""
    proc = subprocess.run([str(installed / "bin" / "python"), "-c",
                           "import importlib.metadata, memlens; "
                           "print(importlib.metadata.version('memlens'), memlens.__version__)"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    metadata, package = proc.stdout.split()
    binary = subprocess.run([str(installed / "bin" / "memlens"), "--version"],
                            capture_output=True, text=True, timeout=60).stdout.strip()
    assert metadata == package == binary == source_version()


def test_installed_package_records_python_lines(installed, tmp_path):
    capture = tmp_path / "installed.mlens"
    proc = subprocess.run([str(installed / "bin" / "python"), "-m", "memlens", "run", "-o",
                           str(capture), str(SCRIPTS / "growth.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    item_size, list_items = map(int, proc.stdout.split())
    rows = Recorded(proc, capture).analyze("top", "--by", "line", "--limit", "100000")["rows"]
    growth = [r for r in rows if r["site"]["file"].endswith("growth.py") and
              r["site"]["function"] == "remember"]
    assert len(growth) == 1 and growth[0]["site"]["python"]
    assert growth[0]["leaked_bytes"] == 10_000 * item_size + list_items


def test_installed_package_records_a_span_and_offers_the_pytest_plugin(installed, tmp_path):
    """The wheel's agent (memlens/lib) is the one a Tracker loads, with no memlens run and no
    build tree; the pytest plugin is registered where pytest looks for it."""
    script = tmp_path / "span.py"
    script.write_text(textwrap.dedent("""\
        import importlib.metadata, tracemalloc, memlens
        def make():
            return bytearray(1_000_003)   # line 3
        tracemalloc.start()
        expected = make()
        size = sum(s.size for s in tracemalloc.take_snapshot().statistics("lineno")
                   if s.traceback[0].lineno == 3)
        tracemalloc.stop()
        with memlens.Tracker("span.mlens") as tracker:
            kept = make()
        plugins = [e.value for e in importlib.metadata.entry_points(group="pytest11")]
        print(size, tracker.path, plugins)
        """))
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMLENS_BUILD_DIR", "MEMLENS_AGENT", "PYTHONPATH", "LD_PRELOAD")}
    proc = subprocess.run([str(installed / "bin" / "python"), str(script)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    size, path, plugins = proc.stdout.split(" ", 2)
    assert "memlens.pytest_plugin" in plugins
    rows = Recorded(proc, path).analyze("top", "--by", "line")["rows"]
    made = [r for r in rows if r["site"]["file"].endswith("span.py") and r["site"]["line"] == 3]
    assert len(made) == 1 and made[0]["leaked_bytes"] == int(size)
