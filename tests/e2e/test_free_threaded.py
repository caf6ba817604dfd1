"""Free-threaded CPython (3.13t, 3.14t: built with --disable-gil) under memlens: the allocator
wrappers survive initialization, eight threads allocating at once are counted exactly as
tracemalloc counts them, the GIL stays off, and mimalloc's arenas are a figure of their own."""
import subprocess

import pytest

from conftest import MEMLENS, REPO, Recorded

SCRIPTS = REPO / "tests" / "python" / "scripts"


@pytest.fixture
def free_threaded(python):
    """The interpreter under test (conftest's `python`), when it is a free-threaded build: these
    tests are about such builds, and run under each one that is under test (CI requires 3.13t
    and 3.14t: test_interpreters.py)."""
    if not python.free_threaded:
        pytest.skip(f"about free-threaded builds; Python {python.tag} has a GIL")
    return python


def line_of(script, marker):
    for number, text in enumerate((SCRIPTS / script).read_text().splitlines(), start=1):
        if text.endswith(f"# @{marker}"):
            return number
    raise AssertionError(f"no @{marker} in {script}")


def record(python, tmp_path, script, name="python.mlens"):
    capture = tmp_path / name
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", str(python), script],
                          capture_output=True, text=True, timeout=300, cwd=SCRIPTS)
    return Recorded(proc, capture)


def at_line(recorded, script, marker):
    """(in use at exit bytes, blocks, of which Python's allocator bytes) at the marked line."""
    line = line_of(script, marker)
    rows = [r for r in recorded.analyze("top", "--by", "line", "--limit", "100000")["rows"]
            if r["site"]["file"].endswith("/" + script) and r["site"]["line"] == line]
    return tuple(sum(r[k] for r in rows)
                 for k in ("leaked_bytes", "leaked_blocks", "python_leaked_bytes"))


def test_wrappers_are_in_place_at_the_first_line(python, tmp_path):
    """Py_Initialize does not put its own allocators back over memlens's: the script's first
    line, run after initialization, is seen through Python's allocator, to the byte."""
    size = subprocess.run([str(python), "-c", "import sys; print(sys.getsizeof(bytearray(123_456)))"],
                          capture_output=True, text=True, check=True).stdout
    r = record(python, tmp_path, "first_line.py")
    assert r.proc.returncode == 0, r.proc.stderr
    assert at_line(r, "first_line.py", "first") == (int(size), 2, int(size))  # object + buffer


def test_a_function_name_beyond_ascii_is_read_right(python, tmp_path):
    """The hooks encode a code object's name to UTF-8 themselves (no call into the interpreter,
    which takes a lock for it in a free-threaded build): two- and three-byte characters."""
    r = record(python, tmp_path, "unicode_names.py")
    assert r.proc.returncode == 0, r.proc.stderr
    line = line_of("unicode_names.py", "named")
    rows = [row for row in r.analyze("top", "--by", "line", "--limit", "100000")["rows"]
            if row["site"]["file"].endswith("/unicode_names.py") and row["site"]["line"] == line]
    assert [row["site"]["function"] for row in rows] == ["größe_日本"]


def test_eight_threads_at_once_are_counted_as_tracemalloc_counts(free_threaded, tmp_path):
    """Eight threads released together allocate at the same lines, truly in parallel: the bytes
    and blocks at each line equal what tracemalloc reports for the same script, in each of 20
    runs (none crashes), and the GIL stays off as it is without memlens."""
    script = "eight_threads.py"
    plain = subprocess.run([str(free_threaded), script], capture_output=True, text=True, cwd=SCRIPTS,
                           check=True).stdout
    assert plain == "gil False\n"
    out = subprocess.run([str(free_threaded), script, "tracemalloc"], capture_output=True, text=True,
                         cwd=SCRIPTS, check=True).stdout.split()
    markers = ("words", "blobs", "nodes")
    expected = {m: (int(out[2 * i]), int(out[2 * i + 1])) for i, m in enumerate(markers)}
    assert expected["words"][1] == 8 * 4000 and expected["nodes"][1] == 8 * 2000
    assert expected["blobs"][1] == 8 * 50 * 2  # each bytearray: its object and its buffer
    for run in range(20):
        r = record(free_threaded, tmp_path, script, f"run{run}.mlens")
        assert r.proc.returncode == 0, (run, r.proc.stderr)
        assert r.proc.stdout == plain, run
        for marker in markers:
            nbytes, blocks, python_bytes = at_line(r, script, marker)
            assert (nbytes, blocks) == expected[marker], (run, marker)
            assert python_bytes == nbytes, (run, marker)
        r.capture.unlink()


def test_mimalloc_arenas_are_their_own_figure(free_threaded, tmp_path):
    """mimalloc replaces pymalloc: the address space it maps from inside Python's allocator
    (an arena of 1 GiB, reserved at its first allocation) is a figure of its own, in no heap
    total, named as mimalloc's in the summary."""
    r = record(free_threaded, tmp_path, "first_line.py")
    assert r.proc.returncode == 0, r.proc.stderr
    totals = r.analyze("summary")["totals"]
    assert totals["mimalloc_mapped_peak_bytes"] >= 1 << 30
    assert totals["mimalloc_mapped_at_exit_bytes"] >= 1 << 30  # mimalloc keeps its arenas
    assert totals["peak_bytes"] < 64 << 20  # the objects in the arena, not the arena again
    text = subprocess.run([str(MEMLENS), "summary", str(r.capture)], capture_output=True,
                          text=True, check=True).stdout
    assert "mimalloc mapped 1.00 GiB of address space at most" in text
    assert "pymalloc" not in text
