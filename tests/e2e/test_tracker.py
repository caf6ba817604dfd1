"""Spans recorded from inside a running program, without `memlens run` (issue 28; docs/api.md,
"Spans"): memlens.Tracker / memlens.start / memlens.stop in a plain interpreter, and
memlens_start / memlens_stop from C with the agent dlopen'ed. Exact bytes at exact lines;
blocks allocated before a span, after it, or between two spans are in no span's figures; a
block allocated inside and freed after stop is in use at the span's end."""
import json
import os
import re
import subprocess
import textwrap

import pytest

from conftest import BUILD, PROGRAMS, REPO, line_of, memlens, package_environment

AGENT = BUILD / "lib" / "libmemlens.so"
pytestmark = pytest.mark.skipif(not list((BUILD / "lib").glob("libmemlens_python*.so")),
                                reason="memlens was built without Python headers, so there are "
                                "no Python hooks for a span to put on")


environment = package_environment  # conftest.py


class Script:
    """A Python program written to the test's folder, with `# @name` lines to find."""

    def __init__(self, folder, source):
        self.source = textwrap.dedent(source)
        self.path = folder / "span_program.py"
        self.path.write_text(self.source)

    def line(self, marker):
        for number, text in enumerate(self.source.splitlines(), start=1):
            if re.search(r"# @" + re.escape(marker) + r"\b", text):
                return number
        raise AssertionError(f"no @{marker}")

    def run(self, python, **env):
        proc = subprocess.run([str(python), str(self.path)], capture_output=True, text=True,
                              timeout=120, cwd=self.path.parent, env=environment(**env))
        assert proc.returncode == 0, proc.stderr
        return proc


def analyze(capture, command, *args):
    out = memlens(command, capture, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def rows_by_line(capture, file_suffix):
    """{line: top --by line row} of the sites in the file ending with file_suffix."""
    rows = analyze(capture, "top", "--by", "line", "--limit", "100000")["rows"]
    return {r["site"]["line"]: r for r in rows if r["site"]["file"].endswith(file_suffix)}


def leaks_by_line(capture, file_suffix):
    leaks = analyze(capture, "leaks")["leaks"]
    return {l["site"]["line"]: l for l in leaks if l["site"]["file"].endswith(file_suffix)}


def leaked_through(capture, file_suffix, line):
    """(bytes, blocks) in use at the capture's end whose stack passes through file:line (a
    native frame under a Python site)."""
    leaks = [l for l in analyze(capture, "leaks")["leaks"]
             if any(f.get("file", "").endswith(file_suffix) and f.get("line") == line
                    for f in l["stack"])]
    return sum(l["bytes"] for l in leaks), sum(l["blocks"] for l in leaks)


def test_agent_static_tls_is_small_enough_to_dlopen():
    """glibc leaves a module dlopen'ed after start about 1 KiB of static TLS for initial-exec
    variables (its surplus, shared with every other such module): the agent's block must stay a
    small part of it (it was 4,176 bytes, and dlopen failed)."""
    headers = subprocess.run(["readelf", "-lW", str(AGENT)], capture_output=True, text=True,
                             check=True).stdout
    tls = [line.split() for line in headers.splitlines() if line.split()[:1] == ["TLS"]]
    assert len(tls) == 1, headers
    assert int(tls[0][5], 16) <= 256, tls[0]


def test_loaded_agent_records_nothing_until_start(python, tmp_path):
    """dlopen'ed under the default glibc tunables, the agent loads, and records nothing: no
    capture appears, and memlens_is_recording says 0."""
    script = Script(tmp_path, f"""
        import ctypes, os
        lib = ctypes.PyDLL({str(AGENT)!r}, mode=os.RTLD_LOCAL | os.RTLD_NODELETE)
        blocks = [bytearray(1000) for _ in range(100)]
        print(lib.memlens_is_recording())
        """)
    env = {k: v for k, v in environment().items() if k != "GLIBC_TUNABLES"}
    proc = subprocess.run([str(python), str(script.path)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout == "0\n", proc.stderr
    assert proc.stderr == ""
    assert not list(tmp_path.glob("*.mlens*"))


SPAN = """
    import memlens
    kept = freed_after = tracker = after = None  # globals made now: a new one may grow the dict
    before = bytearray(1_000_001)              # @before
    freed_inside = bytearray(1_100_011)        # @freed_inside


    def work():
        global kept, freed_after
        kept = bytearray(2_000_003)            # @kept
        temporary = bytearray(3_000_005)       # @temporary
        del temporary
        freed_after = bytearray(4_000_007)     # @freed_after


    tracker = memlens.Tracker("span.mlens")
    with tracker:
        work()
        del freed_inside
    after = bytearray(5_000_011)               # @after
    del freed_after
    print(tracker.path)
    """


def test_span_counts_exact_python_bytes_at_their_lines(python, tmp_path):
    script = Script(tmp_path, SPAN)
    proc = script.run(python)
    capture = tmp_path / "span.mlens"
    assert proc.stdout == f"{capture}\n"
    rows = rows_by_line(capture, "/span_program.py")
    size = python.size_of
    kept, temporary, freed_after = (rows.get(script.line(m))
                                    for m in ("kept", "temporary", "freed_after"))
    assert kept and kept["allocated_bytes"] == kept["leaked_bytes"] == size("bytearray(2_000_003)")
    assert kept["python_allocated_bytes"] == kept["allocated_bytes"]
    assert temporary["allocated_bytes"] == size("bytearray(3_000_005)")
    assert temporary["leaked_bytes"] == 0
    # Freed after stop: in use at the span's end.
    assert freed_after["allocated_bytes"] == freed_after["leaked_bytes"] == size(
        "bytearray(4_000_007)")
    # Before and after the span: not in it. Freed inside, allocated before: an unmatched free.
    for marker in ("before", "freed_inside", "after"):
        assert script.line(marker) not in rows
    leaks = leaks_by_line(capture, "/span_program.py")
    assert sorted(leaks) == sorted([script.line("kept"), script.line("freed_after")])
    summary = analyze(capture, "summary")
    assert summary["capture"]["end_reason"] == "stopped"
    assert summary["capture"]["complete"] is True
    assert summary["totals"]["unmatched_frees"] >= 1
    text = memlens("summary", capture).stdout
    assert "(a span, stopped by memlens_stop)" in text and "still allocated at stop" in text


def test_flush_makes_a_growing_capture_readable(python, tmp_path):
    """After Tracker.flush() the views read the capture while the span still records: the block
    is there, in use, and the capture has no END yet."""
    script = Script(tmp_path, f"""
        import json, subprocess, memlens
        block = None
        with memlens.Tracker("growing.mlens") as tracker:
            block = bytearray(1_000_003)               # @block
            tracker.flush()
            ask = lambda *view: json.loads(subprocess.run(
                [{str(BUILD / "bin" / "memlens")!r}, *view, tracker.path, "--json"],
                capture_output=True, text=True).stdout)
            rows = ask("top", "--by", "line")["rows"]
            print(ask("summary")["capture"]["end_reason"],
                  *[r["leaked_bytes"] for r in rows if r["site"]["line"] == 5])
        """)
    assert script.line("block") == 5
    assert script.run(python).stdout.split() == ["None",
                                                 str(python.size_of("bytearray(1_000_003)"))]


def test_start_stop_start_gives_two_captures_with_their_own_figures(python, tmp_path):
    script = Script(tmp_path, """
        import memlens
        # Every global exists before the spans: a new one could grow the module's dict there.
        first = one = path_one = between = second = two = path_two = None
        first = memlens.start()
        one = bytearray(1_000_003)                 # @one
        path_one = memlens.stop()
        between = bytearray(2_000_005)             # @between
        second = memlens.start()
        two = bytearray(3_000_007)                 # @two
        del one                                    # allocated in the first span
        path_two = memlens.stop()
        print(path_one)
        print(path_two)
        """)
    proc = script.run(python)
    paths = proc.stdout.split()
    assert len(paths) == 2
    for n, path in enumerate(paths, start=1):  # memlens-%e-%p-N.mlens in the current directory
        assert re.fullmatch(re.escape(str(tmp_path)) + r"/memlens-python[\w.]*-\d+-" + str(n)
                            + r"\.mlens", path), path
    one, two = (rows_by_line(p, "/span_program.py") for p in paths)
    assert one[script.line("one")]["leaked_bytes"] == python.size_of("bytearray(1_000_003)")
    assert two[script.line("two")]["leaked_bytes"] == python.size_of("bytearray(3_000_007)")
    # Each span only its own: not the other's block, nor the one between them.
    assert script.line("between") not in one and script.line("two") not in one
    assert script.line("between") not in two and script.line("one") not in two
    for path in paths:
        assert analyze(path, "summary")["capture"]["end_reason"] == "stopped"


def test_spans_and_tracemalloc_chained_on_top_of_them(python, tmp_path):
    """tracemalloc started during a span puts its hooks on top of memlens's: stop leaves ours
    under it, idle, so tracemalloc keeps counting; a later span records through them again."""
    script = Script(tmp_path, """
        import memlens, tracemalloc
        a = b = None
        memlens.start("one.mlens")
        tracemalloc.start()
        a = bytearray(1_000_003)                   # @a
        memlens.stop()
        b = bytearray(2_000_005)                   # @b
        current, peak = tracemalloc.get_traced_memory()
        print(current >= 3_000_008)
        tracemalloc.stop()
        a = None
        with memlens.Tracker("two.mlens"):
            a = bytearray(3_000_007)               # @again
        """)
    assert script.run(python).stdout == "True\n"
    one, two = (rows_by_line(tmp_path / c, "/span_program.py") for c in ("one.mlens", "two.mlens"))
    # At @a also tracemalloc's own record of the block, made through our wrappers under it.
    buffers = [l["bytes"] for l in leaks_by_line_all(tmp_path / "one.mlens",
                                                     "/span_program.py")[script.line("a")]]
    assert 1_000_004 in buffers  # the bytearray's buffer: its size, and the terminating 0
    assert script.line("b") not in one
    assert two[script.line("again")]["leaked_bytes"] == python.size_of("bytearray(3_000_007)")


def test_span_options_python_frames_and_a_sample_rate_kept_for_the_process(python, tmp_path):
    script = Script(tmp_path, """
        import memlens
        x = None
        def inner():
            global x
            x = bytearray(5_000_000)               # @inner
        with memlens.Tracker("frames.mlens", sample_rate=4096, python_frames=1):
            inner()                                # @call
        try:
            memlens.start("other.mlens", sample_rate=100)
        except RuntimeError as error:
            print(error)
        """)
    proc = script.run(python, MEMLENS_SAMPLE_SEED="1")  # the environment's settings apply too
    assert proc.stdout == ("memlens: sample_rate is fixed for the process by its first span "
                           "(4096): this span asks 100\n")
    capture = tmp_path / "frames.mlens"
    assert analyze(capture, "summary")["capture"]["sample_rate"] == 4096
    # One Python frame kept: the stack has @inner's line and not the caller's.
    (leak,) = [l for l in analyze(capture, "leaks")["leaks"] if l["site"]["python"]]
    lines = [f.get("line") for f in leak["stack"] if f.get("file", "").endswith("span_program.py")]
    assert lines == [script.line("inner")]


def test_bad_calls_raise_one_clear_error_and_the_program_goes_on(python, tmp_path):
    script = Script(tmp_path, f"""
        import memlens
        def attempt(call):
            try:
                call()
                print("no error")
            except (RuntimeError, ValueError) as error:
                print(type(error).__name__, error)
        attempt(memlens.stop)
        attempt(lambda: memlens.start({str(tmp_path / "missing" / "x.mlens")!r}))
        attempt(lambda: memlens.start(sample_rate=-1))
        tracker = memlens.start("ok.mlens")
        attempt(lambda: memlens.Tracker("other.mlens").start())
        memlens.stop()
        attempt(tracker.stop)
        print("done")
        """)
    lines = script.run(python).stdout.splitlines()
    assert lines == [
        "RuntimeError memlens: not recording: memlens.start() was not called",
        f"RuntimeError memlens: cannot write the capture '{tmp_path}/missing/x.mlens': "
        "No such file or directory",
        "ValueError memlens: sample_rate must be a whole number >= 0, not -1",
        f"RuntimeError memlens: already recording (into '{tmp_path}/ok.mlens'): stop that span "
        "first",
        "RuntimeError memlens: not recording: this Tracker was not started",
        "done"]
    assert not (tmp_path / "other.mlens").exists()
    assert analyze(tmp_path / "ok.mlens", "summary")["capture"]["end_reason"] == "stopped"


def test_under_memlens_run_start_is_refused_and_the_whole_capture_goes_on(python, tmp_path):
    """Preloaded by memlens run, the agent records the whole process; a span cannot start
    (docs/api.md, "Spans and memlens run") and the run's capture is the same as ever."""
    script = Script(tmp_path, """
        import memlens
        block = None
        try:
            memlens.start("span.mlens")
        except RuntimeError as error:
            print(error)
        block = bytearray(1_000_003)               # @block
        """)
    capture = tmp_path / "whole.mlens"
    proc = subprocess.run([str(BUILD / "bin" / "memlens"), "run", "-o", str(capture), "--",
                           str(python), str(script.path)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=environment())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("memlens: this process is already recorded whole, from its start, by "
                           "memlens run (the agent is preloaded): no span can start; the whole "
                           "capture goes on\n")
    assert not (tmp_path / "span.mlens").exists()
    assert analyze(capture, "summary")["capture"]["end_reason"] == "exit"
    row = rows_by_line(capture, "/span_program.py")[script.line("block")]
    assert row["allocated_bytes"] == python.size_of("bytearray(1_000_003)")


def test_a_child_of_a_recorded_process_records_spans_through_the_preloaded_agent(python,
                                                                                  tmp_path):
    """memlens run records the parent only; its child inherits the preloaded agent, passive,
    and can record a span with it (nothing patched: its interposers are the program's)."""
    child = Script(tmp_path, """
        import memlens, memlens_test_ext
        block = None
        with memlens.Tracker("child.mlens"):
            block = bytearray(2_000_003)               # @block
            memlens_test_ext.alloc_without_gil(12345)  # @native
        """)
    parent = tmp_path / "parent.py"
    parent.write_text(f"import subprocess, sys\n"
                      f"subprocess.run([sys.executable, {str(child.path)!r}], check=True)\n")
    proc = subprocess.run([str(BUILD / "bin" / "memlens"), "run", "-o", str(tmp_path / "p.mlens"),
                           "--", str(python), str(parent)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=environment())
    assert proc.returncode == 0, proc.stderr
    rows = rows_by_line(tmp_path / "child.mlens", "/span_program.py")
    assert rows[child.line("block")]["leaked_bytes"] == python.size_of("bytearray(2_000_003)")
    native = rows[child.line("native")]
    assert native["allocated_bytes"] - native["python_allocated_bytes"] == 12345
    assert analyze(tmp_path / "child.mlens", "summary")["capture"]["end_reason"] == "stopped"


# --- native memory (the GOT/PLT patcher) ---------------------------------------------------------

def test_native_bytes_of_an_extension_in_a_span(python, tmp_path):
    """An extension module imported before the span mallocs without the GIL and from a thread
    of its own: only the span's calls count, at the extension's line and the Python line."""
    ext = REPO / "tests" / "python" / "ext" / "memlens_test_ext.c"
    script = Script(tmp_path, """
        import memlens, memlens_test_ext
        memlens_test_ext.alloc_without_gil(11111)          # @before
        with memlens.Tracker("native.mlens"):
            memlens_test_ext.alloc_without_gil(12345)      # @inside
            memlens_test_ext.alloc_in_native_thread(23456)
        memlens_test_ext.alloc_without_gil(33333)          # @after
        """)
    script.run(python)
    capture = tmp_path / "native.mlens"
    assert leaked_through(capture, "/memlens_test_ext.c", line_of_ext(ext, "without_gil")) == (
        12345, 1)
    assert leaked_through(capture, "/memlens_test_ext.c", line_of_ext(ext, "native_thread")) == (
        23456, 1)
    # The Python line that called in, known although the call released the GIL.
    rows = rows_by_line(capture, "/span_program.py")
    inside = rows[script.line("inside")]
    assert inside["allocated_bytes"] - inside["python_allocated_bytes"] == 12345
    assert script.line("before") not in rows and script.line("after") not in rows


def line_of_ext(source, marker):
    for number, text in enumerate(source.read_text().splitlines(), start=1):
        if f"// @{marker}" in text:
            return number
    raise AssertionError(marker)


def test_library_dlopened_after_start_is_seen(python, tmp_path):
    """plugin_alloc.so is loaded (ctypes: dlopen) inside the span: its malloc is patched as it
    loads. (Its constructor's malloc runs inside dlopen, before that: docs/api.md.)"""
    script = Script(tmp_path, f"""
        import ctypes, memlens
        plugin = block = None
        with memlens.Tracker("plugin.mlens"):
            plugin = ctypes.CDLL({str(PROGRAMS / "plugin_alloc.so")!r})
            plugin.plugin_allocate.restype = ctypes.c_void_p
            block = plugin.plugin_allocate()
        """)
    script.run(python)
    assert leaked_through(tmp_path / "plugin.mlens", "/libplugin_alloc.c",
                          line_of("libplugin_alloc.c", "plugin_allocate")) == (4321, 1)


def test_numpy_inside_a_span(python, tmp_path):
    """numpy's data buffers (its own allocator over malloc/calloc) at the Python line."""
    script = Script(tmp_path, """
        import memlens, numpy
        before = numpy.ones(1_000_000)
        ones = zeros = None
        with memlens.Tracker("numpy.mlens"):                # @span
            ones = numpy.ones(1_000_000)               # @ones
            zeros = numpy.zeros(2_000_000)             # @zeros
            del before
        """)
    script.run(python)
    # numpy's data buffer is a block of its own, with its own stack, at the line: through the
    # C library's malloc (numpy 2.4 on 3.11), or Python's raw domain (numpy 2.5).
    leaks = leaks_by_line_all(tmp_path / "numpy.mlens", "/span_program.py")
    assert 8_000_000 in [l["bytes"] for l in leaks[script.line("ones")]]
    assert 16_000_000 in [l["bytes"] for l in leaks[script.line("zeros")]]
    assert set(leaks) <= {script.line("ones"), script.line("zeros"), script.line("span")}


def leaks_by_line_all(capture, file_suffix):
    """{line: [leaks entries]} at the sites in the file ending with file_suffix."""
    found = {}
    for l in analyze(capture, "leaks")["leaks"]:
        if l["site"]["file"].endswith(file_suffix):
            found.setdefault(l["site"]["line"], []).append(l)
    return found


# --- the C API, with the agent dlopen'ed ---------------------------------------------------------

def test_c_program_records_two_spans_with_the_agent_dlopened(tmp_path):
    one, two = tmp_path / "one.mlens", tmp_path / "two.mlens"
    unwritable = tmp_path / "missing" / "x.mlens"
    proc = subprocess.run([str(PROGRAMS / "span_api"), str(AGENT), str(one), str(two),
                           str(unwritable)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=environment())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "stop before start: -1", "start: 0", "start again: -1", "stop: 0", "stop again: -1",
        "start unwritable: -1",
        f"reason: cannot write the capture '{unwritable}': No such file or directory",
        "bad option: -1", "reason: native='2' is not 0 or 1",
        "start second: 0", "stop second: 0"]
    assert proc.stderr.splitlines() == [
        "memlens: memlens_stop: not recording: no span was started",
        f"memlens: memlens_start: already recording (into '{one}'): stop that span first; not "
        "recording",
        "memlens: memlens_stop: not recording: no span was started"]
    first, second = (rows_by_line(c, "/span_api.c") for c in (one, two))
    assert {line: r["leaked_bytes"] for line, r in first.items()} == {
        line_of("span_api.c", "first_span"): 10001}
    assert {line: r["leaked_bytes"] for line, r in second.items()} == {
        line_of("span_api.c", "second_span"): 20002}
    for capture in (one, two):
        assert analyze(capture, "summary")["capture"]["end_reason"] == "stopped"


def test_markers_snapshots_and_heaps_reach_the_span(python, tmp_path):
    """memlens.marker/snapshot/Heap go into the span's capture (api.py is bound to the agent the
    span loaded), and are no-ops while nothing records."""
    script = Script(tmp_path, """
        import memlens
        kept = more = heap = path = None
        memlens.marker("before")                   # nothing records yet: a no-op
        memlens.start("span.mlens")
        kept = bytearray(1_000_003)                # @kept
        memlens.marker("loaded")
        heap = memlens.Heap("pool")
        heap.alloc(0x1000, 4096)
        memlens.snapshot("pooled")
        more = bytearray(2_000_005)                # @more
        path = memlens.stop()
        print(path)
        """)
    path = script.run(python).stdout.strip()
    at_marker = rows_by_line(path + "@marker:loaded", "/span_program.py")
    assert at_marker[script.line("kept")]["leaked_bytes"] == python.size_of("bytearray(1_000_003)")
    assert script.line("more") not in at_marker
    at_snapshot = rows_by_line(path + "@snapshot:pooled", "/span_program.py")
    assert script.line("kept") in at_snapshot and script.line("more") not in at_snapshot
    pool = analyze(path, "summary", "--heap", "pool")
    assert pool["totals"]["in_use_at_exit_bytes"] == 4096, pool["totals"]
    refused = memlens("summary", path + "@marker:before")
    assert refused.returncode != 0 and "before" in refused.stderr
