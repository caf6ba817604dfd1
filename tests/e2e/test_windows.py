"""memlens for Windows programs (issue 31; docs/windows.md): the programs of tests/windows,
cross-built with mingw-w64 (tools/build-windows), run under wine by memlens.exe with the agent
DLL injected; the Linux `memlens` reads the captures. Exact bytes at exact lines, as on Linux.

Wine runs in a prefix kept in a cache folder (made by the first run: a few seconds), with its
crash debugger off (a crashing program then ends as it would on Windows with no debugger
registered) and one wineserver kept across the module's tests. Without wine or the Windows build
these tests skip, saying why; CI installs both and sets MEMLENS_REQUIRE_WINDOWS=1, under which
they fail instead.
"""
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

from conftest import REPO, Recorded, memlens
from conftest import line_of as conftest_line_of

WINDOWS_BUILD = pathlib.Path(os.environ.get("MEMLENS_WINDOWS_BUILD_DIR", REPO / "build-windows"))
LAUNCHER = WINDOWS_BUILD / "bin" / "memlens.exe"
PROGRAMS = WINDOWS_BUILD / "tests"
SOURCES = REPO / "tests" / "windows"
WINE = shutil.which("wine") or shutil.which("wine64")
# A prefix is 700 MB: one, kept (MEMLENS_WINE_PREFIX: another).
PREFIX = pathlib.Path(os.environ.get("MEMLENS_WINE_PREFIX",
                                     pathlib.Path.home() / ".cache" / "memlens" / "wine-prefix"))
ACCESS_VIOLATION = 0xC0000005


def missing():
    if WINE is None:
        return "wine is not installed (Debian: wine64)"
    if not LAUNCHER.exists():
        return f"{LAUNCHER} is missing (tools/build-windows builds it)"
    return None


@pytest.fixture(scope="module")
def wine_env():
    why = missing()
    if why:
        if os.environ.get("MEMLENS_REQUIRE_WINDOWS") == "1":
            pytest.fail(f"MEMLENS_REQUIRE_WINDOWS=1 but {why}", pytrace=False)
        pytest.skip(why)
    env = {**os.environ, "WINEPREFIX": str(PREFIX), "WINEDEBUG": "-all",
           "WINEDLLOVERRIDES": "winedbg.exe=d;mscoree=d;mshtml=d"}
    PREFIX.parent.mkdir(parents=True, exist_ok=True)
    # Wine's server and services outlive the program that starts them, holding its standard
    # handles: started here on /dev/null, not on a pipe a later run would wait on to close. The
    # first program in a new prefix makes it (wineboot: half a minute).
    # The server stays 60 s past its last program, across the tests, and then ends by itself:
    # no `wineserver -k`, which would end every program of the prefix, other runs' too.
    quiet = dict(env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
    subprocess.run(["wineserver", "-p60"], check=False, **quiet)
    subprocess.run([WINE, "cmd", "/c", "exit"], timeout=300, check=False, **quiet)
    return env


def wine(env, *argv, timeout=180, cwd=None):
    return subprocess.run([WINE, *map(str, argv)], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, cwd=cwd)


class WindowsRun(Recorded):
    """A program of tests/windows run under memlens.exe, and `memlens` (Linux) on its capture."""
    sources = SOURCES

    def __init__(self, env, tmp_path, program, *args):
        self.env = env
        capture = tmp_path / f"{program}.mlens"
        proc = wine(env, LAUNCHER, "run", "-o", capture, "--", PROGRAMS / f"{program}.exe", *args,
                    cwd=tmp_path)
        super().__init__(proc, capture)

    def analyze(self, command, *args):
        out = memlens(command, self.capture, "--json", *args, env=self.env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)


def line_of(source, marker):
    return conftest_line_of(source, marker, SOURCES)


@pytest.fixture
def run(wine_env, tmp_path):
    def start(program, *args):
        r = WindowsRun(wine_env, tmp_path, program, *args)
        assert r.capture.exists(), r.proc.stderr
        return r
    return start


def test_leak_through_a_helper_tells_its_two_callers_apart(run):
    r = run("leak_two_callers")
    assert r.proc.returncode == 0, r.proc.stderr
    assert r.proc.stdout == "leaked\n"
    site = r.row_at("leak_two_callers.c", "helper")
    assert site["site"]["function"] == "keep"
    assert site["allocations"] == 8 and site["allocated_bytes"] == 3 * 1000 + 5 * 2000
    assert site["leaked_blocks"] == 8 and site["leaked_bytes"] == 13000
    freed = r.row_at("leak_two_callers.c", "freed")
    assert freed["allocated_bytes"] == 4096 and freed["leaked_bytes"] == 0
    by_caller = {}
    for leak in r.analyze("leaks")["leaks"]:
        if leak["site"]["function"] == "keep":
            caller = leak["stack"][1]
            by_caller[(caller["function"], caller["line"])] = (leak["blocks"], leak["bytes"])
    assert by_caller == {("main", line_of("leak_two_callers.c", "first")): (3, 3000),
                         ("main", line_of("leak_two_callers.c", "second")): (5, 10000)}


def test_new_array_peak_and_what_is_never_deleted(run):
    r = run("new_array_peak")
    assert r.proc.returncode == 0, r.proc.stderr
    arrays = r.row_at("new_array_peak.cc", "arrays")
    assert arrays["allocations"] == 10 and arrays["peak_bytes"] == 40000
    assert arrays["peak_blocks"] == 10 and arrays["leaked_bytes"] == 0
    kept = r.row_at("new_array_peak.cc", "kept")
    assert kept["allocated_bytes"] == 25000 and kept["leaked_bytes"] == 25000
    assert kept["peak_bytes"] == 0, "the arrays' peak came before it"


def test_eight_threads(run):
    r = run("threads")
    assert r.proc.returncode == 0, r.proc.stderr
    block = r.row_at("threads.c", "block")
    assert block["allocations"] == 8000 and block["allocated_bytes"] == 8000 * 48
    assert block["leaked_blocks"] == 80 and block["leaked_bytes"] == 80 * 48
    summary = r.analyze("summary")
    assert summary["process"]["threads"] >= 9  # main and the eight
    assert summary["totals"]["dropped_events"] == 0


def test_a_library_loaded_and_unloaded_at_run_time(run):
    r = run("library_loader")
    assert r.proc.returncode == 0, r.proc.stderr
    # Symbolized from the DLL's debug information although it was unloaded before the end.
    block = r.row_at("library.c", "library_block")
    assert block["site"]["function"] == "library_allocate"
    assert block["site"]["module"].endswith("library.dll")
    assert block["allocations"] == 3 and block["leaked_bytes"] == 3 * 1234
    # Its DllMain ran before LoadLibrary returned: its malloc was hooked already.
    at_load = r.row_at("library.c", "at_load")
    assert at_load["site"]["function"] == "DllMain" and at_load["leaked_bytes"] == 777
    after = r.row_at("library_loader.c", "after")
    assert after["allocated_bytes"] == 100
    stack = [l for l in r.analyze("leaks")["leaks"] if l["site"]["function"] == "library_allocate"]
    assert stack and stack[0]["stack"][1]["line"] == line_of("library_loader.c", "call")


def test_private_heaps_are_custom_heaps(run):
    r = run("private_heap")
    assert r.proc.returncode == 0, r.proc.stderr
    heaps = {row["heap"]: row
             for row in r.analyze("top", "--by", "heap")["rows"]}
    kept, gone = heaps["HeapCreate #1"], heaps["HeapCreate #2"]
    assert kept["leaked_bytes"] == 3 * 3000 + 6000 and kept["leaked_blocks"] == 4
    assert gone["allocated_bytes"] == 1400 and gone["leaked_bytes"] == 0  # HeapDestroy
    blocks = r.row_at("private_heap.c", "blocks", "--heap", "HeapCreate #1")
    assert blocks["allocations"] == 4 and blocks["leaked_bytes"] == 6000
    # A block is released before HeapReAlloc runs (it may be handed out again at once); when
    # the call fails, the block is recorded again, with its size, where the call was.
    failed = r.row_at("private_heap.c", "failed", "--heap", "HeapCreate #1")
    assert failed["allocations"] == 1 and failed["leaked_bytes"] == 3000
    zeroed = r.row_at("private_heap.c", "zeroed", "--heap", "HeapCreate #1")
    assert zeroed["allocated_bytes"] == 5000 and zeroed["leaked_bytes"] == 0
    grown = r.row_at("private_heap.c", "grown", "--heap", "HeapCreate #1")
    assert grown["allocated_bytes"] == 6000 and grown["leaked_bytes"] == 6000
    ntdll = r.row_at("private_heap.c", "ntdll")  # the process heap: the system heap's figures
    assert ntdll["allocated_bytes"] == 4321 and ntdll["leaked_bytes"] == 4321
    # The failed HeapReAlloc left blocks[1] where it was, and no event is missing.
    assert r.analyze("summary")["capture"]["warnings"] == []


def test_virtual_alloc_is_mapped_memory(run):
    r = run("virtual_memory")
    assert r.proc.returncode == 0, r.proc.stderr
    commit = r.row_at("virtual_memory.c", "commit")
    assert commit["mapping_allocated_bytes"] == 64 << 10
    assert commit["mapping_leaked_bytes"] == 64 << 10
    released = r.row_at("virtual_memory.c", "released")
    assert released["mapping_allocated_bytes"] == 256 << 10
    assert released["mapping_leaked_bytes"] == 0
    kept = r.row_at("virtual_memory.c", "kept")
    assert kept["mapping_leaked_bytes"] == 128 << 10
    # Reserved address space is not memory: what of the reservation was never committed.
    assert not r.rows_at("virtual_memory.c", "reserve")
    assert r.analyze("summary")["totals"]["mappings"]["reserved_bytes"] == (1 << 20) - (64 << 10)


def test_arguments_console_directory_and_exit_code_pass_through(wine_env, tmp_path):
    args = ["42", "a b", 'q"uote', "back\\\\", "", "tab\there"]
    plain = wine(wine_env, PROGRAMS / "arguments.exe", *args, cwd=tmp_path)
    traced = WindowsRun(wine_env, tmp_path, "arguments", *args).proc
    assert plain.returncode == traced.returncode == 42
    assert traced.stdout == plain.stdout
    assert "[a b]\n" in plain.stdout and '[q"uote]\n' in plain.stdout
    memlens_lines = [l for l in traced.stderr.splitlines() if l.startswith("memlens:")]
    assert [l for l in traced.stderr.splitlines() if l not in memlens_lines] == \
        plain.stderr.splitlines()
    assert memlens_lines == [f"memlens: capture written to Z:{tmp_path}\\arguments.mlens"
                             .replace("/", "\\")]
    # The capture's argv is the program's, split as its C runtime split it.
    argv = WindowsRun.__new__(WindowsRun)
    argv.env, argv.capture = wine_env, tmp_path / "arguments.mlens"
    assert argv.analyze("summary")["process"]["argv"][1:] == args


def test_a_crash_leaves_a_readable_capture(run, wine_env, tmp_path):
    plain = wine(wine_env, PROGRAMS / "crash.exe", cwd=tmp_path)
    r = run("crash")
    assert r.proc.returncode == plain.returncode == ACCESS_VIOLATION & 0xFF
    assert r.proc.stdout == plain.stdout == "crashing\n"
    summary = r.analyze("summary")
    assert summary["capture"]["end_reason"] == "signal"
    blocks = r.row_at("crash.c", "before_crash")
    assert blocks["allocations"] == 3 and blocks["leaked_bytes"] == 3 * 512


def test_bad_input_gets_a_clear_message(wine_env, tmp_path):
    missing_program = wine(wine_env, LAUNCHER, "run", "--", tmp_path / "no-such.exe")
    assert missing_program.returncode == 127
    assert "memlens: cannot run" in missing_program.stderr
    unknown = wine(wine_env, LAUNCHER, "run", "--frobnicate", "x.exe")
    assert unknown.returncode == 2 and "unknown option --frobnicate" in unknown.stderr
    no_program = wine(wine_env, LAUNCHER, "run")
    assert no_program.returncode == 2 and "no program" in no_program.stderr
    help_text = wine(wine_env, LAUNCHER, "run", "--help")
    assert help_text.returncode == 0 and "usage: memlens run" in help_text.stderr


def test_memlens_h_custom_heaps_markers_and_flush(run):
    r = run("custom_heap")
    assert r.proc.returncode == 0, r.proc.stderr  # memlens_start answered -1: no spans here
    assert r.proc.stdout == "recording 1\n"
    assert "spans (memlens_start, memlens_stop) are not available on Windows" in r.proc.stderr
    nodes = r.row_at("custom_heap.c", "nodes", "--heap", "pool")
    assert nodes["allocations"] == 10 and nodes["allocated_bytes"] == 1000
    assert nodes["peak_bytes"] == 600 and nodes["leaked_bytes"] == 0  # 4 freed, then reset
    big = r.row_at("custom_heap.c", "big", "--heap", "pool")
    assert big["allocated_bytes"] == 2000 and big["peak_bytes"] == 2000 and big["leaked_bytes"] == 0
    after = r.row_at("custom_heap.c", "after_reset", "--heap", "pool")
    assert after["leaked_bytes"] == 300
    types = {row["type"]: row for row in r.analyze("top", "--heap", "pool", "--by", "type")["rows"]}
    assert types["node"]["allocated_bytes"] == 1000
    pool = r.row_at("custom_heap.c", "pool")  # the pool's own memory, in the system heap
    assert pool["leaked_bytes"] == 64 << 10
    markers = r.analyze("summary")["markers"]
    assert [(m["name"], m["category"]) for m in markers] == [("nodes_done", "phase")]
    out = memlens("top", f"{r.capture}@marker:nodes_done", "--json", "--heap", "pool", env=r.env)
    assert out.returncode == 0, out.stderr
    assert sum(row["leaked_bytes"] for row in json.loads(out.stdout)["rows"]) == 600


@pytest.mark.parametrize("program", ["crt_functions", "crt_functions_ucrt"])
def test_the_c_runtimes_other_functions(run, program):
    """calloc, realloc (grown, shrunk, to 0), _aligned_malloc, _aligned_realloc, _aligned_free:
    against msvcrt.dll and against ucrtbase.dll."""
    r = run(program)
    assert r.proc.returncode == 0, r.proc.stderr
    expected = {  # marker: (allocated, still in use at exit)
        "calloc": (300, 300), "malloc": (100, 0), "grow": (5000, 0), "shrink": (700, 700),
        "gone": (64, 0), "aligned": (1000, 0), "aligned_grow": (3000, 3000),
        "aligned_freed": (512, 0)}
    seen = {marker: (row["allocated_bytes"], row["leaked_bytes"])
            for marker in expected for row in [r.row_at("crt_functions.c", marker)]}
    assert seen == expected
    # The runtime each was built against (the import table's DLL names), so both hook families
    # are what passed above.
    image = (PROGRAMS / f"{program}.exe").read_bytes()
    assert (b"api-ms-win-crt-heap" in image) == program.endswith("ucrt")
    assert (b"msvcrt.dll" in image.lower()) != program.endswith("ucrt")


def test_a_heap_used_across_threads_and_short_threads(run, wine_env, tmp_path):
    r = run("heap_threads")
    assert r.proc.returncode == 0, r.proc.stderr
    heaps = {row["heap"]: row for row in r.analyze("top", "--by", "heap")["rows"]}
    assert heaps["HeapCreate #1"]["allocated_bytes"] == 10000
    assert heaps["HeapCreate #1"]["leaked_bytes"] == 0  # destroyed by main, after the worker
    assert not r.rows_at("heap_threads.c", "worker_blocks")  # none in the system heap
    blocks = r.row_at("heap_threads.c", "worker_blocks", "--heap", "HeapCreate #1")
    assert blocks["allocations"] == 10
    # 300 threads came and went: their rings went with them (a few may be left for the next
    # writer cycle).
    plain = wine(wine_env, PROGRAMS / "heap_threads.exe", cwd=tmp_path)
    regions = lambda out: int(out.split()[-1])
    assert regions(r.proc.stdout) - regions(plain.stdout) < 10, (r.proc.stdout, plain.stdout)
    assert r.analyze("summary")["process"]["threads"] >= 302


def test_the_last_error_is_left_as_the_program_set_it(run, wine_env, tmp_path):
    plain = wine(wine_env, PROGRAMS / "last_error.exe", cwd=tmp_path)
    r = run("last_error")
    assert r.proc.returncode == plain.returncode == 0
    assert r.proc.stdout == plain.stdout
    assert "malloc 12345\n" in plain.stdout and "HeapFree 45678\n" in plain.stdout


def test_exit_from_a_dllmain_under_the_loader_lock(run, wine_env, tmp_path):
    """ExitProcess while the loader's lock is held: the agent's END waits for the writer's own
    signal, not its thread's exit (which needs that lock): no 10 s wait."""
    plain = wine(wine_env, PROGRAMS / "exit_in_dllmain.exe", cwd=tmp_path)
    start = time.monotonic()
    r = run("exit_in_dllmain")
    took = time.monotonic() - start
    assert r.proc.returncode == plain.returncode == 7
    assert took < 5, f"{took:.1f} s"
    assert r.analyze("summary")["capture"]["end_reason"] == "exit"


def test_every_view_and_export_reads_a_windows_capture(run, tmp_path):
    r = run("library_loader")
    assert r.proc.returncode == 0, r.proc.stderr
    for view in ("summary", "top", "tree", "leaks", "timeline", "map", "histogram", "temporary"):
        out = memlens(view, r.capture, env=r.env)
        assert out.returncode == 0 and out.stdout, (view, out.stderr)
    tree = memlens("tree", r.capture, env=r.env).stdout
    assert "library_allocate" in tree and "DllMain" in tree
    report = tmp_path / "report.html"
    assert memlens("report", r.capture, "-o", report, env=r.env).returncode == 0
    assert "library_allocate" in report.read_text()
    for fmt in ("pprof", "speedscope", "folded", "chrome-trace", "csv"):
        target = tmp_path / f"export.{fmt}"
        out = memlens("export", fmt, r.capture, "-o", target, env=r.env)
        assert out.returncode == 0 and target.stat().st_size > 0, (fmt, out.stderr)
    # No mapping samples on Windows: memlens rss says so.
    rss = memlens("rss", r.capture, env=r.env)
    assert rss.returncode == 2 and "recorded on Windows" in rss.stderr
