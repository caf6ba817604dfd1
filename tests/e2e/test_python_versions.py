"""Which interpreters memlens records with their Python frames, and the one-line refusal of any
other (issue 26): hooks exist per version and build (libmemlens_python3.13.so, ...3.13t.so);
`memlens run` picks them from the interpreter's file name or by asking it, and refuses one it has
none for before it runs; an agent preloaded by hand into such an interpreter says so once and
records native allocations only."""
import glob
import os
import subprocess

import pytest

from conftest import BUILD, PROGRAMS, Recorded, memlens

HOOKS = sorted((BUILD / "lib").glob("libmemlens_python*.so"))
TAGS = ", ".join(sorted(h.name[len("libmemlens_python"):-len(".so")] for h in HOOKS)) or \
    "(none: built without Python headers)"


def refusal(tag):
    return (f"memlens: Python {tag} is not supported: this memlens reads the frames of Python "
            f"{TAGS}; run a supported interpreter\n")


def test_unsupported_interpreter_is_refused_with_one_line_before_it_runs():
    """python_unsupported answers the version question as python3.12 would (its name says no
    version): refused, exit status 2, the supported tags named, the program not run."""
    proc = memlens("run", "--", PROGRAMS / "python_unsupported", "script.py")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == refusal("3.12")


@pytest.mark.parametrize("version", ["3.12", "3.10"])
def test_real_unsupported_interpreter_is_refused(version):
    found = sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    if not found:
        pytest.skip(f"no Python {version} on this machine (pyenv's /root/.pyenv/versions/"
                    f"{version}.*): python_unsupported stands in for it in the test above")
    proc = memlens("run", "--", found[0], "-c", "print('ran')")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == refusal(version)


@pytest.mark.parametrize("name", ["python3.99", "python3.98t"])
def test_interpreter_tag_is_read_from_its_name_without_starting_it(tmp_path, name):
    """`memlens run` knows python3 -> python3.13t (free-threaded) from the link's target name;
    starting the interpreter to ask it would add a start-up to every run. A file so named is
    refused before it runs: it would print "ran" if it did."""
    fake = tmp_path / name
    fake.write_text("#!/bin/sh\necho ran\n")
    fake.chmod(0o755)
    link = tmp_path / "python3"
    link.symlink_to(fake)
    proc = memlens("run", "--", str(link), "-c", "pass")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == refusal(name[len("python"):])


def test_free_threaded_build_under_its_plain_name_is_free_threaded(tmp_path):
    """A free-threaded build installs bin/python3.14 as a hard link to bin/python3.14t: run by
    the plain name, it is still the free-threaded interpreter (its hooks, its refusal)."""
    fake = tmp_path / "python3.98t"
    fake.write_text("#!/bin/sh\necho ran\n")
    fake.chmod(0o755)
    plain = tmp_path / "python3.98"
    plain.hardlink_to(fake)
    proc = memlens("run", "--", str(plain), "-c", "pass")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr == refusal("3.98t")


def test_agent_in_an_unsupported_interpreter_says_one_line_and_records_native(tmp_path):
    """Preloaded by hand (no `memlens run` to refuse it), the agent finds Py_Version 3.12 and
    no hooks for it: one line, the program unchanged, its native allocation still recorded."""
    capture = tmp_path / "unsupported.mlens"
    proc = subprocess.run([str(PROGRAMS / "python_unsupported")], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, LD_PRELOAD=str(BUILD / "lib" / "libmemlens.so"),
                                               MEMLENS_OUTPUT=str(capture)))
    assert proc.returncode == 0 and proc.stdout == "ran\n"
    said = [line for line in proc.stderr.splitlines() if "Python" in line]
    assert said == [f"memlens: Python 3.12 is not supported by this memlens build (no "
                    f"{BUILD / 'lib' / 'libmemlens_python3.12.so'}): Python frames are not "
                    "recorded, only native allocations"]
    row = Recorded(proc, capture).row_at("python_unsupported.c", "alloc")
    assert row["allocated_bytes"] == 1000 and row["allocations"] == 1
