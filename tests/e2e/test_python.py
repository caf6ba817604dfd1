"""Python programs under memlens: exact bytes at exact Python lines, Python and native frames in
one stack, and the interpreter's behaviour (argv, exit status, errors) unchanged."""
import functools
import json
import os
import subprocess

import pytest

from conftest import BUILD, MEMLENS, REPO, Recorded, memlens
from interpreters import REQUIRED

SCRIPTS = REPO / "tests" / "python" / "scripts"
HOOKS = list((BUILD / "lib").glob("libmemlens_python*.so"))
pytestmark = pytest.mark.skipif(not HOOKS, reason="memlens was built without Python headers, "
                                "so there are no Python hooks to test")


def line_of(script, marker):
    for number, text in enumerate((SCRIPTS / script).read_text().splitlines(), start=1):
        if f"# @{marker}" in text:
            return number
    raise AssertionError(f"no @{marker} in {script}")


def tracemalloc_reference(python):
    """((bytes, blocks) at @bytearray, (bytes, blocks) at @ints) of lines.py: what tracemalloc
    counts there, run without memlens under the interpreter under test."""
    reference = subprocess.run([python, str(SCRIPTS / "lines.py"), "tracemalloc"],
                               capture_output=True, text=True, check=True).stdout.split()
    return [(int(reference[i]), int(reference[i + 1])) for i in (0, 2)]


def traced(python, tmp_path, *args):
    """{(file, line): (bytes, blocks)} that tracemalloc counts in use when `python *args` exits,
    run without memlens (tests/python/traced/sitecustomize.py)."""
    out = tmp_path / "traced.json"
    path = os.pathsep.join([str(REPO / "tests" / "python" / "traced"), str(BUILD / "tests" / "python")])
    subprocess.run([python, *args], capture_output=True, text=True, check=True, timeout=120,
                   cwd=SCRIPTS, env=dict(os.environ, PYTHONPATH=path, MEMLENS_TRACED_OUT=str(out)))
    return {(file, line): (size, count) for file, line, size, count in json.loads(out.read_text())}


def traced_at(python, tmp_path, script, marker):
    """What tracemalloc counts in use at exit at the marked line of the script (under SCRIPTS)."""
    found = traced(python, tmp_path, str(SCRIPTS / script))
    return found.get((str(SCRIPTS / script), line_of(script, marker)))


def comprehension_frame(python):
    """The function a list comprehension's allocations are at: "<listcomp>" up to 3.11, the
    enclosing function since comprehensions are inlined (3.12, PEP 709)."""
    return python.output("import sys; print([sys._getframe().f_code.co_name for _ in '1'][0])"
                         ).strip()


@pytest.fixture
def record_python(tmp_path, python):
    def run(*args, env=None, cwd=None, timeout=120, interpreter=None):
        capture = tmp_path / "python.mlens"
        environment = dict(os.environ, PYTHONPATH=str(BUILD / "tests" / "python"), **(env or {}))
        proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--",
                               interpreter or python, *args],
                              capture_output=True, text=True, timeout=timeout, env=environment,
                              cwd=cwd or SCRIPTS)
        return Recorded(proc, capture)
    return run


def rows_at(recorded, script, marker):
    line = line_of(script, marker)
    rows = recorded.analyze("top", "--by", "line", "--limit", "100000")["rows"]
    return [r for r in rows if r["site"]["file"].endswith("/" + script) and r["site"]["line"] == line]


def one_row(recorded, script, marker):
    rows = rows_at(recorded, script, marker)
    assert len(rows) == 1, rows
    assert rows[0]["site"]["python"]
    return rows[0]


def test_bytearray_and_a_million_ints_at_their_lines(record_python, python):
    """The same script run without memlens under tracemalloc gives the reference: memlens must
    count exactly the bytes and blocks tracemalloc counts at each line."""
    (blob_bytes, blob_blocks), (int_bytes, int_blocks) = tracemalloc_reference(python)
    r = record_python(str(SCRIPTS / "lines.py"))
    assert r.proc.returncode == 0, r.proc.stderr
    blob_size = python.size_of("bytearray(50_000_000)")
    assert r.proc.stdout.split()[0] == str(blob_size)
    blob = rows_at(r, "lines.py", "bytearray")
    assert {row["site"]["function"] for row in blob} == {"make_bytearray"}
    assert sum(row["leaked_bytes"] for row in blob) == blob_bytes == blob_size
    assert sum(row["leaked_blocks"] for row in blob) == blob_blocks
    assert sum(row["python_leaked_bytes"] for row in blob) == blob_bytes  # all Python allocator
    ints = rows_at(r, "lines.py", "ints")  # the comprehension's frame (and the module's, same line)
    assert comprehension_frame(python) in {row["site"]["function"] for row in ints}
    assert sum(row["leaked_bytes"] for row in ints) == int_bytes
    # A million ints and the list's array (lines.py empties 3.14's free list of ints first).
    assert sum(row["leaked_blocks"] for row in ints) == int_blocks >= 1_000_001


def numpy_data_in_python_allocator(python):
    """Whether the interpreter under test's numpy takes an array's data from Python's RAW
    domain (PyMem_RawMalloc: numpy 2.5 does; 2.4 called malloc). tracemalloc cannot tell: numpy
    reports its buffers to it in a domain of its own either way; numpy's version can."""
    return python.output("import numpy; print(tuple(map(int, numpy.__version__.split('.')[:2]))"
                         " >= (2, 5))") == "True\n"


def test_numpy_array_is_attributed_to_the_users_line(record_python, python):
    if not python.has_module("numpy"):
        # CI requires the interpreters, and tools/build-pythons installs numpy into each.
        message = f"numpy (from PyPI) is not installed in {python}: the numpy test needs it"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    in_python = numpy_data_in_python_allocator(python)
    r = record_python(str(SCRIPTS / "numpy_array.py"))
    assert r.proc.returncode == 0, r.proc.stderr
    assert r.proc.stdout == "80000000\n"
    row = one_row(r, "numpy_array.py", "numpy")
    native = row["leaked_bytes"] - row["python_leaked_bytes"]
    assert native == (0 if in_python else 80_000_000)  # the data buffer's domain, as tracemalloc's
    # The full stack holds numpy's Python code and numpy's native frames around the malloc.
    leak = [l for l in r.analyze("leaks", "--limit", "1000")["leaks"] if l["bytes"] == 80_000_000][0]
    frames = leak["stack"]
    assert any(f["python"] and f["file"].endswith("numpy_array.py") for f in frames)
    assert any(not f["python"] and "numpy" in f["module"] for f in frames)
    assert any(f["python"] and "numpy" in f["file"] for f in frames)


def test_growth_shows_at_the_append_line(record_python, python, tmp_path):
    r = record_python(str(SCRIPTS / "growth.py"))
    assert r.proc.returncode == 0, r.proc.stderr
    item_size, list_items = map(int, r.proc.stdout.split())
    row = one_row(r, "growth.py", "append")
    assert row["site"]["function"] == "remember"
    # What tracemalloc counts there: the objects' and the list's sizes as Python reports them,
    # and, in a free-threaded build, the list's header and the arrays it has not yet freed.
    reference = traced_at(python, tmp_path, "growth.py", "append")
    assert (row["leaked_bytes"], row["leaked_blocks"]) == reference
    assert row["leaked_bytes"] >= 10_000 * item_size + list_items
    tree = r.analyze("tree", "--metric", "leaked", "--min-percent", "0")
    names = set()

    def walk(node):
        if "frame" in node:
            names.add((node["frame"]["function"], node["frame"]["python"]))
        for child in node["children"]:
            walk(child)
    walk(tree["root"])
    assert ("remember", True) in names and ("<module>", True) in names
    assert any(not python for _, python in names)  # native frames in the same tree


def test_threads_generators_coroutines_and_c_extensions(record_python, python, tmp_path):
    r = record_python(str(SCRIPTS / "threads_and_generators.py"))
    assert r.proc.returncode == 0, r.proc.stderr
    assert r.proc.stdout == "done\n"
    script = "threads_and_generators.py"
    # Each line's bytes and blocks as tracemalloc counts them: with the GIL, the bytearrays'
    # sizes; a free-threaded build also still holds there the list's first array, replaced by a
    # later append and freed only at a later quiescent point.
    reference = traced(python, tmp_path, str(SCRIPTS / script))
    for marker, size in (("thread", python.size_of("bytearray(3_000_000)")),
                         ("generator", 3 * python.size_of("bytearray(1_000_000)")),
                         ("coroutine", python.size_of("bytearray(2_000_000)"))):
        row = one_row(r, script, marker)
        expected = reference.get((str(SCRIPTS / script), line_of(script, marker)))
        assert (row["leaked_bytes"], row["leaked_blocks"]) == expected, marker
        assert row["leaked_bytes"] >= size, marker
    generator = one_row(r, script, "generator")
    # C code called from Python with the GIL released: still the Python line that called it.
    nogil = one_row(r, script, "nogil")
    assert nogil["leaked_bytes"] - nogil["python_leaked_bytes"] == 5_000_000
    # A thread that never ran Python: native frames only, at the C line.
    leaks = r.analyze("leaks", "--limit", "1000")["leaks"]
    native = [l for l in leaks if l["bytes"] == 7_000_000]
    assert len(native) == 1
    assert native[0]["site"]["function"] == "native_thread_main"
    assert native[0]["site"]["file"].endswith("memlens_test_ext.c")
    assert not any(f["python"] for f in native[0]["stack"])
    # The generator's stack goes through the line that consumed it.
    gen = [l for l in leaks if l["site"]["line"] == generator["site"]["line"]][0]
    consume = (script, __import__("test_python").line_of(script, "consume"))
    assert any(f["file"].endswith(consume[0]) and f["line"] == consume[1] for f in gen["stack"])


def test_python_threads_leave_no_unmatched_free(record_python, python):
    """Each thread's first Python frame lookup once made glibc allocate the hooks library's
    thread-local storage (unrecorded, under the guard) and free it at thread exit (recorded)."""
    r = record_python(str(SCRIPTS / "ten_threads.py"))
    assert r.proc.returncode == 0, r.proc.stderr
    assert r.proc.stdout == f"{sum(100_000 + i for i in range(10))}\n"
    summary = r.analyze("summary")
    assert summary["totals"]["unmatched_frees"] == 0
    assert summary["anomalies"]["total"] == 0
    row = one_row(r, "ten_threads.py", "thread_block")
    # Per thread: the bytearray object and its buffer (the sizes are made in the main thread).
    assert (row["allocations"], row["leaked_blocks"]) == (20, 20)
    assert row["leaked_bytes"] == sum(python.size_of(f"bytearray({100_000 + i})") for i in range(10))
    assert summary["process"]["threads"] == 11


def test_a_thread_per_task_leaves_no_memory_behind(record_python, python):
    """A program that runs each task on a thread of its own, one after another (a thread per
    request): each exited thread's ring, and the Python hooks' cache of its frames, go to the
    next thread. They once stayed: the cache (16 KiB) of every thread ever started was never
    unmapped, 14 to 46 MiB over these 2000 threads (python -m http.server grew by 16 KiB a
    request), and rings waited up to 50 ms for the writer to free them."""
    r = record_python(str(SCRIPTS / "thread_per_task.py"), timeout=300)
    assert r.proc.returncode == 0, r.proc.stderr
    growth_kib = int(r.proc.stdout)
    # What is left: rings made while the writer had not yet read an exited thread's last events
    # (about 0.6 MiB each under memlens run), a few on a busy machine; the caches alone of the
    # 1900 threads after the 100th would be 29.7 MiB.
    assert growth_kib < 16 << 10, f"the address space grew {growth_kib} KiB over 1900 threads"
    row = one_row(r, "thread_per_task.py", "task")
    assert (row["allocations"], row["leaked_blocks"]) == (2 * 2000, 2 * 2000)
    assert row["leaked_bytes"] == 2000 * python.size_of("bytearray(10_000)")
    summary = r.analyze("summary")
    assert summary["totals"]["dropped_events"] == 0
    # Threads are counted by OS thread id, which the kernel may give again to a later thread.
    assert 1900 <= summary["process"]["threads"] <= 2001
    # The hooks' caches are memlens's own memory, which memlens rss names as such.
    view = json.loads(memlens("rss", f"{r.capture}@end", "--json").stdout)
    unexplained = next(p for p in view["parts"] if p["part"] == "unexplained")
    assert unexplained["virtual_bytes"] < 1 << 20, unexplained


def test_exit_status_traceback_and_errors_pass_through(record_python, tmp_path):
    r = record_python(str(SCRIPTS / "exits.py"), "3")
    assert r.proc.returncode == 3 and r.proc.stdout == "argv: ['3']\n"
    r = record_python(str(SCRIPTS / "exits.py"), "raise")
    assert r.proc.returncode == 1
    assert "Traceback (most recent call last)" in r.proc.stderr
    assert "RuntimeError: boom from the script" in r.proc.stderr
    r = record_python(str(SCRIPTS / "syntax_error.py"))
    assert r.proc.returncode == 1 and "SyntaxError" in r.proc.stderr
    r = record_python(str(tmp_path / "missing.py"))
    assert r.proc.returncode == 2 and "can't open file" in r.proc.stderr
    binary = tmp_path / "not_python.py"
    binary.write_bytes(bytes(range(256)))
    r = record_python(str(binary))
    assert r.proc.returncode == 1 and "SyntaxError" in r.proc.stderr


def test_module_run_as_a_program(record_python, python):
    r = record_python("-m", "demo_package", "x", "y")
    assert r.proc.returncode == 0, r.proc.stderr
    assert r.proc.stdout == "package ['x', 'y']\n"
    row = one_row(r, "demo_package/__main__.py", "package")
    assert row["leaked_bytes"] == python.size_of("bytearray(4_000_000)")


def test_python_dash_m_memlens_run(tmp_path, python):
    capture = tmp_path / "via_module.mlens"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"), MEMLENS_BUILD_DIR=str(BUILD))
    for args in (["run", "-o", str(capture), str(SCRIPTS / "exits.py"), "5"],
                 ["run", "-o", str(capture), "-m", "exits", "5"]):
        proc = subprocess.run([python, "-m", "memlens", *args], capture_output=True, text=True,
                              env=env, cwd=SCRIPTS, timeout=120)
        assert proc.returncode == 5, proc.stderr
        assert proc.stdout == "argv: ['5']\n"
        assert Recorded(proc, capture).analyze("summary")["process"]["argv"][-1] == "5"
    proc = subprocess.run([python, "-m", "memlens", "run", "-o", str(capture), "nope.py"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode != 0 and "cannot open 'nope.py'" in proc.stderr


def test_python_allocator_arenas_are_their_own_figure(record_python, python):
    r = record_python(str(SCRIPTS / "lines.py"))
    totals = r.analyze("summary")["totals"]
    if python.free_threaded:  # mimalloc's arenas instead (test_free_threaded.py)
        assert totals["mimalloc_mapped_peak_bytes"] >= 1 << 30
    else:  # a million small ints live in the object allocator's arenas
        assert totals["pymalloc_arena_peak_bytes"] >= 1_000_000 * python.size_of("1000")
    assert totals["python_allocated_bytes"] > 0
    # Arenas are not counted as allocations: the peak is the objects (the bytearray, the list
    # and its ints, as tracemalloc counts them, and less than 8 MB of interpreter start-up), not
    # objects and arenas again.
    (blob_bytes, _), (int_bytes, _) = tracemalloc_reference(python)
    objects = blob_bytes + int_bytes
    # A free-threaded build frees the list's outgrown arrays late: at the peak they may all be
    # there still, at most the final array's size again (the list grows geometrically).
    late = python.size_of("list(range(1_000_000))") if python.free_threaded else 0
    assert objects <= totals["peak_bytes"] < objects + late + 8_000_000


def test_interpreter_behind_a_wrapper_is_asked_its_version_and_build(record_python, tmp_path,
                                                                     python):
    """A wrapper named python (as pyenv's shims are) says no version in its name: `memlens run`
    asks the interpreter, "3.13t" for a free-threaded one, and records with the hooks for it."""
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
    wrapper.chmod(0o755)
    r = record_python(str(SCRIPTS / "lines.py"), interpreter=wrapper)
    assert r.proc.returncode == 0, r.proc.stderr
    blob = rows_at(r, "lines.py", "bytearray")
    assert sum(row["leaked_bytes"] for row in blob) == python.size_of("bytearray(50_000_000)")


def test_non_ascii_file_and_function_names(record_python, tmp_path, python):
    """Registering a code object whose names are not ASCII goes through the interpreter and
    may allocate while an allocation is being recorded: the capture must stay whole."""
    folder = tmp_path / "josé ünïcode"
    folder.mkdir()
    script = folder / "naïve.py"
    script.write_text("import os\n\ndef créer():\n    return bytearray(3_000_000)  # @here\n\n"
                      "kept = [créer() for _ in range(5)]\nprint('ok', flush=True)\nos._exit(0)\n",
                      encoding="utf-8")
    r = record_python(str(script))
    assert r.proc.returncode == 0 and r.proc.stdout == "ok\n", r.proc.stderr
    summary = r.analyze("summary")
    assert summary["capture"]["complete"] and summary["capture"]["warnings"] == []
    rows = r.analyze("top", "--by", "line", "--limit", "100000")["rows"]
    here = [row for row in rows if row["site"]["function"] == "créer"]
    assert len(here) == 1 and here[0]["site"]["file"] == str(script) and here[0]["site"]["line"] == 4
    assert here[0]["leaked_bytes"] == 5 * python.size_of("bytearray(3_000_000)")


def test_python_depth_limit_keeps_the_innermost_frames(tmp_path, python):
    capture = tmp_path / "shallow.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--python-frames", "1", "--",
                           python, str(SCRIPTS / "lines.py")], capture_output=True, text=True,
                          timeout=120, cwd=SCRIPTS)
    assert proc.returncode == 0, proc.stderr
    leaks = Recorded(proc, capture).analyze("leaks", "--limit", "5")["leaks"]
    blob = [l for l in leaks if l["bytes"] == 50_000_001][0]  # the bytearray's buffer
    python = [f["function"] for f in blob["stack"] if f["python"]]
    assert python == ["make_bytearray"]  # <module> was cut: one Python frame kept
    assert blob["site"]["line"] == line_of("lines.py", "bytearray")
    bad = memlens("run", "--python-frames", "0", "--", python, "-c", "pass")
    assert bad.returncode == 2 and "--python-frames" in bad.stderr


def is_interpreter(frame):
    """A native frame of the interpreter itself: the python executable or libpython."""
    return not frame["python"] and os.path.basename(frame["module"]).startswith(
        ("python3", "libpython3"))


def bytes_by_python_line(tree):
    """Each node's own bytes at the innermost Python frame of its path: (file, line) -> bytes."""
    lines = {}

    def walk(node, line):
        frame = node.get("frame")
        if frame and frame["python"]:
            line = (frame["file"], frame["line"])
        if node["self"]:
            lines[line] = lines.get(line, 0) + node["self"]
        for child in node["children"]:
            walk(child, line)
    walk(tree["root"], None)
    return lines


def test_interpreter_frames_fold_in_python_stacks(record_python, python, tmp_path):
    """The interpreter's own C frames (start-up, eval loop, calls) fold by default: <module> is
    at the top of the tree, the frame that allocated stays (list_resize growing a list), an
    extension's frame between two Python frames stays, and --interpreter-frames shows them all.
    The bytes at each line are the same either way."""
    r = record_python(str(SCRIPTS / "folded.py"))
    assert r.proc.returncode == 0, r.proc.stderr
    list_bytes, blob_bytes, kept_bytes = map(int, r.proc.stdout.split())
    script = str(SCRIPTS / "folded.py")
    append, make, call = (line_of("folded.py", m) for m in ("append", "make", "call"))
    # The bytes at each line as tracemalloc counts them: sys.getsizeof's, and in a free-threaded
    # build a list's array has a header too.
    reference = traced(python, tmp_path, script)
    assert reference[(script, append)][0] >= list_bytes
    assert reference[(script, make)][0] >= blob_bytes + kept_bytes
    list_bytes, made_bytes = reference[(script, append)][0], reference[(script, make)][0]
    tree_args = ("--metric", "leaked", "--min-percent", "0")
    folded = r.analyze("tree", *tree_args)

    # No interpreter frame has children: each is the innermost frame of its stacks.
    def interpreter_parents(node):
        found = []
        for child in node["children"]:
            if is_interpreter(child["frame"]) and child["children"]:
                found.append(child["frame"]["function"])
            found += interpreter_parents(child)
        return found
    assert interpreter_parents(folded["root"]) == []
    full = r.analyze("tree", *tree_args, "--interpreter-frames")
    assert interpreter_parents(full["root"]) != []  # _start, Py_BytesMain... are back

    def child(node, function, line):
        kids = [c for c in node["children"] if (c["frame"]["function"], c["frame"]["file"],
                                                c["frame"]["line"]) == (function, script, line)]
        assert len(kids) == 1, [c["frame"] for c in node["children"]]
        return kids[0]
    grow = line_of("folded.py", "grow")
    grown = child(child(folded["root"], "<module>", grow), "grow", append)
    assert grown["self"] == grown["total"] == list_bytes and grown["children"] == []
    called = child(folded["root"], "<module>", call)["children"]
    assert [c["frame"]["function"] for c in called] == ["call"]  # the extension's frame
    called = called[0]
    assert called["frame"]["file"].endswith("memlens_test_ext.c")
    assert child(called, "make", make)["self"] == made_bytes
    assert not any(c["frame"]["function"] == "<module>" for c in full["root"]["children"])

    lines = bytes_by_python_line(folded)
    assert lines == bytes_by_python_line(full)
    assert lines[(script, append)] == list_bytes
    assert lines[(script, make)] == made_bytes

    # Full stacks, innermost first. The list's buffer: list_resize, the interpreter's frame that
    # allocated it, then grow and <module>.
    def stack_of(line, min_bytes, *args):
        leaks = r.analyze("leaks", "--limit", "100000", *args)["leaks"]
        found = [l["stack"] for l in leaks
                 if l["site"]["line"] == line and l["bytes"] >= min_bytes]
        assert len(found) == 1, [l["site"] for l in leaks[:5]]
        return found[0]
    stack = stack_of(append, list_bytes)
    assert [(f["function"], f["line"]) for f in stack[1:]] == [("grow", append), ("<module>", grow)]
    # list_resize (3.11), or what it inlines to allocate (list_allocate_array, free-threaded 3.13)
    assert is_interpreter(stack[0]) and stack[0]["function"].startswith("list_"), stack[0]
    # The bytearray's buffer: the interpreter's allocating frame, make, the extension's call,
    # <module>, and nothing else.
    make_stack = functools.partial(stack_of, make, 3_000_000)
    stack = make_stack()
    assert is_interpreter(stack[0])
    assert [(f["function"], f["python"]) for f in stack[1:]] == [
        ("make", True), ("call", False), ("<module>", True)]
    assert stack[2]["file"].endswith("memlens_test_ext.c") and stack[3]["line"] == call
    whole = make_stack("--interpreter-frames")
    assert [f for f in whole if f in stack] == stack  # the same frames, in order, and more:
    between = whole[whole.index(stack[1]) + 1:whole.index(stack[2])]
    assert between and all(is_interpreter(f) for f in between)  # the call back into Python
    assert "Py_BytesMain" in [f["function"] for f in whole[whole.index(stack[3]):]]

    # The report's flame graphs come from the same stacks.
    for args, shown in (((), False), (("--interpreter-frames",), True)):
        page = r.capture.with_suffix(".html")
        proc = memlens("report", r.capture, "-o", page, *args)
        assert proc.returncode == 0, proc.stderr
        assert ("Py_BytesMain" in page.read_text()) == shown

    # Sites do not move.
    for by in ("line", "function"):
        rows = r.analyze("top", "--by", by, "--limit", "100000")["rows"]
        assert rows == r.analyze("top", "--by", by, "--limit", "100000",
                                 "--interpreter-frames")["rows"]
