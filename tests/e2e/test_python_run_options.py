"""`python3 -m memlens run` takes `memlens run`'s options as the executable defines them: the
package keeps no list of its own (it asks `memlens run --list-options`), so an option added on
the C++ side works from Python with no second edit."""
import os
import re
import subprocess

from conftest import BUILD, REPO, Recorded, memlens

SCRIPTS = REPO / "tests" / "python" / "scripts"


def python_memlens(python, *args, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"), MEMLENS_BUILD_DIR=str(BUILD))
    return subprocess.run([python, "-m", "memlens", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def run_help_options():
    """Every option name `memlens run --help` shows, from the help text a user reads."""
    proc = memlens("run", "--help")
    assert proc.returncode == 0, proc.stderr
    names = set(re.findall(r"^\s+((?:-\w|--[\w-]+)(?:,\s*--?[\w-]+)*)", proc.stdout, re.M))
    names = {n.strip() for group in names for n in group.split(",")}
    return names - {"-h", "--help"}


def test_every_run_option_is_in_the_python_usage(tmp_path, python):
    names = run_help_options()
    assert {"-o", "--output", "--sample", "--sample-rate", "--python-frames", "--no-index"} <= names
    proc = python_memlens(python, "run", cwd=tmp_path)
    assert proc.returncode != 0 and "no script given" in proc.stderr
    missing = [name for name in sorted(names) if not re.search(rf"\[{name}[ \]]", proc.stderr)]
    assert missing == [], proc.stderr


def test_run_options_with_attached_values_and_flags(tmp_path, python):
    capture = tmp_path / "attached.mlens"
    proc = python_memlens(python, "run", f"--output={capture}", "--sample-rate=4K", "--no-index",
                          "--python-frames", "8", SCRIPTS / "exits.py", "5", cwd=tmp_path)
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout == "argv: ['5']\n"
    assert not (tmp_path / "attached.mlens.index").exists()  # --no-index: none while it ran
    summary = Recorded(proc, capture).analyze("summary")
    assert summary["capture"]["sample_rate"] == 4096


def test_unknown_run_option_is_refused_by_memlens(tmp_path, python):
    proc = python_memlens(python, "run", "--no-such-option", SCRIPTS / "exits.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "run: unknown option '--no-such-option'" in proc.stderr
    proc = python_memlens(python, "run", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "--sample-rate" in proc.stdout
