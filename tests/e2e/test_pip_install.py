"""`pip install .` in a fresh virtual environment gives a working memlens: the console script,
`python3 -m memlens`, and Python frames from the installed hooks. Slow (a full build inside
pip), so it runs once and checks everything on the one installation, under the Python running the
tests only: a wheel for another interpreter would rebuild all of memlens (minutes each) to differ
only by its hooks library, which the other Python tests check under every interpreter."""
import os
import re
import subprocess
import sys
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
