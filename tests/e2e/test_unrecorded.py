"""What memlens cannot record, it says: a static or setuid program (one line, the program
untouched), child processes (counted in the capture, shown by summary), pyenv's pip wrapper."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, memlens
# The pyenv test records bash, not Python (pyenv runs the interpreter as an unrecorded child):
# the tests' own Python is enough for it.
from interpreters import TESTS_PYTHON as PYTHON


def run_both(program, *args, cwd):
    """The program run directly and under `memlens run` (no -o: nothing is to be written)."""
    direct = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60)
    recorded = subprocess.run([str(MEMLENS), "run", "--", str(program), *args],
                              capture_output=True, text=True, timeout=60, cwd=cwd)
    return direct, recorded


def test_static_program_runs_untouched_and_memlens_says_why(tmp_path):
    program = PROGRAMS / "static_linked"
    direct, recorded = run_both(program, "[x]", cwd=tmp_path)
    assert (direct.returncode, direct.stdout) == (5, "static [x]\n")
    assert (recorded.returncode, recorded.stdout) == (direct.returncode, direct.stdout)
    lines = recorded.stderr.splitlines()
    assert lines[0] == (f"memlens: {program} cannot be recorded: it is statically linked, and the "
                        "agent is loaded through LD_PRELOAD, which only the dynamic loader reads")
    assert len(lines) == 2 and lines[1].startswith("memlens: no capture was written to ")
    assert list(tmp_path.iterdir()) == []


def test_setuid_program_runs_untouched_and_memlens_says_why(tmp_path):
    """A copy of print_args owned by nobody, setuid: run by root it runs as nobody, in the
    loader's secure mode, exactly as a setuid-root program run by a normal user does (the test
    needs root to give the file away; CI runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to make a setuid program owned by another user (CI runs as root)")
    program = tmp_path / "setuid_args"
    shutil.copy(PROGRAMS / "print_args", program)
    os.chown(program, 65534, 65534)
    os.chmod(program, 0o4755)
    if os.statvfs(program).f_flag & os.ST_NOSUID:
        pytest.skip(f"{tmp_path} is on a nosuid file system: no setuid program runs there")
    work = tmp_path / "work"
    work.mkdir()
    direct, recorded = run_both(program, "a b", "[]", cwd=work)
    assert (direct.returncode, direct.stdout) == (3, "a b\0[]\0")
    assert (recorded.returncode, recorded.stdout) == (direct.returncode, direct.stdout)
    lines = recorded.stderr.splitlines()
    assert lines[0] == (f"memlens: {program} cannot be recorded: it is setuid, and the loader "
                        "ignores LD_PRELOAD for a setuid program")
    assert len(lines) == 2 and lines[1].startswith("memlens: no capture was written to ")
    assert list(work.iterdir()) == []


def test_unrecorded_children_are_counted(record):
    """children forks three times and posix_spawns once."""
    r = record("children")
    assert (r.proc.returncode, r.proc.stdout) == (0, "started 4 children\n")
    assert r.analyze("summary")["process"]["unrecorded_children"] == 4
    assert r.row_at("children.c", "kept")["leaked_bytes"] == 100
    text = memlens("summary", r.capture).stdout
    assert ("  children   4 child processes were not recorded (memlens run --follow-children "
            "records those that run a program)\n") in text


def test_a_single_fork_is_one_child(record):
    r = record("forks")
    assert r.analyze("summary")["process"]["unrecorded_children"] == 1
    assert "1 child process was not recorded" in memlens("summary", r.capture).stdout


def test_pyenv_pip_wrapper_is_named(tmp_path):
    """A pyenv layout in miniature: the shim execs libexec/pyenv, which (as pyenv's pip-rehash
    hook does) runs the interpreter as a child of its bash script."""
    root = tmp_path / "pyenv"
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    shim = root / "shims" / "python3"
    shim.write_text('#!/usr/bin/env bash\nset -e\nprogram="${0##*/}"\n'
                    f'exec "{root}/libexec/pyenv" exec "$program" "$@"\n')
    pyenv = root / "libexec" / "pyenv"
    pyenv.write_text('#!/usr/bin/env bash\ncase "$1" in\n'
                     f'  which) echo "{PYTHON}" ;;\n'
                     f'  hooks) echo "{root}/pyenv.d/exec/pip-rehash.bash" ;;\n'
                     f'  exec) shift 2; "{PYTHON}" "$@"; exit $? ;;\n'
                     'esac\n')
    for path in (shim, pyenv):
        path.chmod(0o755)
    args = ["-m", "pip", "--version"]
    direct = subprocess.run([str(shim), *args], capture_output=True, text=True, timeout=60)
    assert direct.returncode == 0 and direct.stdout.startswith("pip ")
    capture = tmp_path / "pip.mlens"
    recorded = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", str(shim), *args],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (recorded.returncode, recorded.stdout) == (0, direct.stdout)
    assert (f"memlens: {shim} is a pyenv shim, and pyenv runs pip as a child of a bash script, "
            "which is all this records (children are not followed yet); to record pip: "
            f"memlens run -- {PYTHON} -m pip --version\n") in recorded.stderr
    summary = Recorded(None, capture).analyze("summary")
    assert summary["process"]["argv"][0].endswith("bash")
    assert summary["process"]["unrecorded_children"] >= 1
    assert "the recorded program is a shell script" in memlens("summary", capture).stdout
