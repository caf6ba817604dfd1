"""The program's arguments reach it byte for byte, whatever they look like: after `--`, after
the program's name without `--`, and through `python3 -m memlens run`."""
import os
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, REPO

# Lists and empty lists (a command-line library reads "[a,b]" as a list), the empty word, spaces,
# glob and shell characters, memlens's own options and `--`, and bytes that are not UTF-8.
ARGS = [b"[a,b]", b"[]", b"", b" sp ace ", b"*", b"$HOME", b"--", b"-x", b"-o", b"--sample",
        b"a=b", b"{x}", b"[.a[] | .+1]", b"[print(i) for i in range(3)]", b"\xff\xfe[\x80]",
        b"-o=x", b"--output", b"--no-index"]

PRINT_ARGS_PY = ("import os, sys\n"
                 "for a in sys.argv[1:]: sys.stdout.buffer.write(os.fsencode(a) + b'\\0')\n")


def run(argv, cwd):
    return subprocess.run(argv, capture_output=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("dashes", [["--"], [], [b"--no-index", b"--sample-rate=1", b"--"],
                                    [b"--python-frames", b"4", b"--no-index"]],
                         ids=["with --", "without --", "flags and --", "flags without --"])
def test_arguments_reach_the_program_byte_for_byte(tmp_path, dashes):
    program = os.fsencode(PROGRAMS / "print_args")
    direct = run([program, *ARGS], tmp_path)
    assert direct.returncode == 3 and direct.stdout == b"\0".join(ARGS) + b"\0"
    capture = tmp_path / "args.mlens"
    recorded = run([os.fsencode(MEMLENS), b"run", b"-o", os.fsencode(capture), *dashes, program,
                    *ARGS], tmp_path)
    assert recorded.stderr.endswith(b"capture written to " + os.fsencode(capture) + b"\n")
    assert (recorded.returncode, recorded.stdout) == (direct.returncode, direct.stdout)


@pytest.mark.parametrize("dashes", [["--"], []], ids=["with --", "without --"])
def test_arguments_reach_a_python_script_byte_for_byte(tmp_path, dashes, python):
    script = tmp_path / "print_args.py"
    script.write_text(PRINT_ARGS_PY)
    direct = run([os.fsencode(python), os.fsencode(script), *ARGS], tmp_path)
    assert direct.returncode == 0 and direct.stdout == b"\0".join(ARGS) + b"\0"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"), MEMLENS_BUILD_DIR=str(BUILD))
    capture = tmp_path / "args.mlens"
    recorded = subprocess.run([os.fsencode(python), b"-m", b"memlens", b"run", b"-o",
                               os.fsencode(capture), *dashes, os.fsencode(script), *ARGS],
                              capture_output=True, timeout=120, cwd=tmp_path, env=env)
    assert recorded.stderr.endswith(b"capture written to " + os.fsencode(capture) + b"\n")
    assert (recorded.returncode, recorded.stdout) == (direct.returncode, direct.stdout)
