"""The Python-lines-only mode (`memlens run --python-stacks`, MEMLENS_PYTHON_STACKS=1, a span's
python_stacks=True; docs/python.md): exact bytes at exact Python lines with no native frame in
any stack of a thread running Python, the allocator's caller alone on a thread that never ran
Python, and the capture saying it was recorded so. The same program in the default mode keeps
its native frames, so these tests fail if the option does nothing."""
import os
import subprocess

import pytest

from conftest import BUILD, MEMLENS, REPO, Recorded, memlens, package_environment
from interpreters import REQUIRED
from test_python import SCRIPTS, line_of, one_row

SCRIPT = "python_stacks.py"
EXT_SOURCE = REPO / "tests" / "python" / "ext" / "memlens_test_ext.c"
MARKERS = ("bytearray", "c_malloc", "native_thread", "numpy")
pytestmark = pytest.mark.skipif(not list((BUILD / "lib").glob("libmemlens_python*.so")),
                                reason="memlens was built without Python headers, so there are "
                                "no Python hooks to test")


environment = package_environment  # conftest.py


def c_line(marker):
    for number, text in enumerate(EXT_SOURCE.read_text().splitlines(), start=1):
        if f"// @{marker}" in text:
            return number
    raise AssertionError(f"no @{marker} in {EXT_SOURCE}")


def with_numpy(python):
    if python.has_module("numpy"):
        return True
    # CI requires the interpreters, and tools/build-pythons installs numpy into each.
    message = f"numpy (from PyPI) is not installed in {python}: its part of the test is left out"
    if REQUIRED:
        pytest.fail(message)
    print(message)
    return False


def run(python, tmp_path, name, *options, via_module=False):
    capture = tmp_path / f"{name}.mlens"
    args = [str(SCRIPTS / SCRIPT)] + (["numpy"] if with_numpy(python) else [])
    command = ([str(python), "-m", "memlens", "run", "-o", str(capture), *options, *args]
               if via_module else
               [str(MEMLENS), "run", "-o", str(capture), *options, "--", str(python), *args])
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env=environment(), cwd=SCRIPTS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "3000000\n"
    return Recorded(proc, capture)


def leaks_at(recorded, marker, source=SCRIPT):
    """The leaks (call stacks) whose site is the marked line."""
    line = line_of(SCRIPT, marker) if source == SCRIPT else c_line(marker)
    return [l for l in recorded.analyze("leaks", "--limit", "100000")["leaks"]
            if l["site"]["file"].endswith("/" + source) and l["site"]["line"] == line]


def module_store(python):
    """The bytes in use at a module-level line storing bytearray(3_000_000) in a new global:
    3.14 grows the module's globals (400 bytes) there (docs/python.md, "Versions")."""
    return python.size_of("bytearray(3_000_000)") + (400 if python.version >= (3, 14) else 0)


def figures(row):
    return row["leaked_bytes"], row["leaked_blocks"], row["python_leaked_bytes"]


@pytest.mark.parametrize("via_module", [False, True], ids=["memlens-run", "python-m-memlens"])
def test_python_lines_only(python, tmp_path, via_module):
    r = run(python, tmp_path, "python_only", "--python-stacks", via_module=via_module)
    full = run(python, tmp_path, "full")
    # The capture says how it was recorded.
    assert r.analyze("summary")["capture"]["python_stacks_only"] is True
    assert "python_stacks_only" not in full.analyze("summary")["capture"]
    text = memlens("summary", r.capture)
    assert text.returncode == 0
    assert "Python lines only (recorded with --python-stacks" in text.stdout
    # Exact bytes at the Python lines: the bytearray (Python's allocator), the malloc made by C
    # code that Python called with the GIL released, numpy's array; the same as full stacks.
    blob = one_row(r, SCRIPT, "bytearray")
    assert blob["leaked_bytes"] == blob["python_leaked_bytes"] == python.size_of(
        "bytearray(3_000_000)")
    assert figures(one_row(r, SCRIPT, "c_malloc")) == (2_000_003, 1, 0)
    numpy = "numpy" in r.proc.args
    for marker in ("bytearray", "c_malloc") + (("numpy",) if numpy else ()):
        assert figures(one_row(r, SCRIPT, marker)) == figures(one_row(full, SCRIPT, marker))
    if numpy:
        assert one_row(r, SCRIPT, "numpy")["leaked_bytes"] >= 4_000_000  # the array's data
    # The Python thread's stacks: Python frames only, innermost at the line that called C.
    [c_malloc] = leaks_at(r, "c_malloc")
    assert [(f["python"], f["function"], f["line"]) for f in c_malloc["stack"]] == [
        (True, "c_malloc", line_of(SCRIPT, "c_malloc")),
        (True, "<module>", line_of(SCRIPT, "call_c"))]
    for marker in ("bytearray",) + (("numpy",) if numpy else ()):
        for leak in leaks_at(r, marker):
            assert all(f["python"] for f in leak["stack"]), (marker, leak)
    # Any stack: Python frames only, or one native return address (its inlined frames
    # resolved from the same address), never both.
    for leak in r.analyze("leaks", "--limit", "100000")["leaks"]:
        native = {f["module_offset"] for f in leak["stack"] if not f["python"]}
        assert not native or (len(native) == 1 and not any(f["python"] for f in leak["stack"])
                              ), leak
    # The thread that never ran Python: the allocator's caller alone, at its C line.
    [native] = leaks_at(r, "native_thread", "memlens_test_ext.c")
    assert native["bytes"] == 1_000_007
    assert [(f["python"], f["function"], f["line"]) for f in native["stack"]] == [
        (False, "native_thread_main", c_line("native_thread"))]
    # Full stacks keep the native frames: the extension's around the malloc, numpy's around
    # its array's data, start_thread's below the native thread's.
    [c_full] = leaks_at(full, "c_malloc")
    assert any(not f["python"] and "memlens_test_ext" in f["module"] for f in c_full["stack"])
    [native_full] = leaks_at(full, "native_thread", "memlens_test_ext.c")
    assert len(native_full["stack"]) > 1
    if numpy:
        assert any(not f["python"] and "numpy" in f["module"]
                   for leak in leaks_at(full, "numpy") for f in leak["stack"])


def test_span_with_python_stacks(python, tmp_path):
    """memlens.Tracker(python_stacks=True): the same in a span, without memlens run."""
    capture = tmp_path / "span.mlens"
    program = tmp_path / "span_program.py"
    program.write_text(
        "import memlens, memlens_test_ext\n"
        f"with memlens.Tracker({str(capture)!r}, python_stacks=True):\n"
        "    kept = bytearray(3_000_000)\n"  # line 3
        "    memlens_test_ext.alloc_without_gil(2_000_003)\n")  # line 4
    proc = subprocess.run([str(python), str(program)], capture_output=True, text=True,
                          timeout=120, env=environment())
    assert proc.returncode == 0, proc.stderr
    r = Recorded(proc, capture)
    assert r.analyze("summary")["capture"]["python_stacks_only"] is True
    rows = {row["site"]["line"]: row
            for row in r.analyze("top", "--by", "line", "--limit", "1000")["rows"]
            if row["site"]["file"] == str(program)}
    assert figures(rows[3])[0] == module_store(python)
    assert figures(rows[4]) == (2_000_003, 1, 0)
    leaks = [l for l in r.analyze("leaks", "--limit", "1000")["leaks"]
             if l["site"]["file"] == str(program)]
    assert leaks and all(f["python"] for l in leaks for f in l["stack"])
    bad = subprocess.run([str(python), "-c", "import memlens; memlens.Tracker('x.mlens')"
                          ".start()"], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env=environment(MEMLENS_PYTHON_STACKS="yes"))
    assert bad.returncode != 0 and "MEMLENS_PYTHON_STACKS='yes' is not 0 or 1" in bad.stderr


def test_bad_environment_value_is_refused_with_one_line(tmp_path):
    proc = subprocess.run(["/bin/echo", "unchanged"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path,
                          env=dict(environment(), MEMLENS_PYTHON_STACKS="yes",
                                   LD_PRELOAD=str(BUILD / "lib" / "libmemlens.so")))
    assert proc.returncode == 0 and proc.stdout == "unchanged\n"
    assert proc.stderr == ("memlens: MEMLENS_PYTHON_STACKS='yes' is not 0 or 1: not "
                           "recording\n")
    assert not list(tmp_path.glob("*.mlens"))
