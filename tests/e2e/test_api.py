"""The instrumentation API (include/memlens/memlens.h, memlens.Heap/marker/snapshot/region):
the examples under examples/ recorded with exact per-heap and per-type figures, markers as
snapshots and as the windows of `leaks --growth`, misuse counted as anomalies with the stack
where it happened, bad snapshot specifiers refused with one line, and programs that run the
same without memlens."""
import json
import os
import re
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, REPO, Recorded, line_of, memlens

EXAMPLES = BUILD / "examples"


def example_line(name, marker):
    for number, text in enumerate((REPO / "examples" / name).read_text().splitlines(), start=1):
        if re.search(r"[/#] @" + re.escape(marker) + r"\b", text):
            return number
    raise AssertionError(f"no @{marker} in examples/{name}")


def record_example(tmp_path_factory, command, env=None):
    capture = tmp_path_factory.mktemp("api") / "capture.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", *command],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))
    assert proc.returncode == 0, proc.stderr
    return Recorded(proc, capture)


def analyze(recorded, spec, command, *args):
    out = memlens(command, f"{recorded.capture}{spec}", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def heap_figures(data, name):
    found = [h for h in data["custom_heaps"] if h["name"] == name]
    assert len(found) == 1, data["custom_heaps"]
    return found[0]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return record_example(tmp_path_factory, [str(EXAMPLES / "foo_pool")])


@pytest.fixture(scope="module")
def game(tmp_path_factory):
    return record_example(tmp_path_factory, [str(EXAMPLES / "game_loop")])


# --- a fixed-size pool of Foo (64 bytes each) in one 1,024-byte malloc'd block ---------------

def test_pool_runs_the_same_without_memlens(pool):
    alone = subprocess.run([str(EXAMPLES / "foo_pool")], capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0 and alone.stdout == pool.proc.stdout == "done 45 9\n"


def test_pool_heap_figures_at_its_snapshot(pool):
    data = analyze(pool, "@snapshot:nine-foos", "summary")
    foo = heap_figures(data, "FooHeap")
    assert (foo["allocations"], foo["allocated_bytes"], foo["frees"]) == (12, 12 * 64, 3)
    assert (foo["in_use_blocks"], foo["in_use_bytes"]) == (9, 9 * 64)
    assert (foo["peak_blocks"], foo["peak_bytes"]) == (12, 12 * 64)
    # Its backing memory: the pool's one block, counted by the system heap, not by FooHeap.
    assert (foo["backing_blocks"], foo["backing_bytes"]) == (1, 16 * 64)
    assert not foo["destroyed"]
    assert [h["name"] for h in data["custom_heaps"]] == ["FooHeap", "FooIndex"]  # no arena yet
    assert data["capture"]["heap"] == "system"


def test_pool_totals_never_count_a_block_twice(pool):
    """The system heap holds the pool's 1,024-byte block; the Foos inside it are FooHeap's."""
    system = analyze(pool, "@snapshot:nine-foos", "top", "--by", "line", "--limit", "1000")
    pool_rows = [r for r in system["rows"] if r["site"]["function"].startswith("FooPool::FooPool")]
    assert [(r["allocations"], r["leaked_bytes"]) for r in pool_rows] == [(1, 1024)]
    assert not any(r["site"]["function"].startswith("FooPool::New") for r in system["rows"])
    by_heap = analyze(pool, "@snapshot:nine-foos", "top", "--by", "heap")
    rows = {r["heap"]: r for r in by_heap["rows"]}
    assert set(rows) == {"system", "FooHeap", "FooIndex"}
    assert (rows["FooHeap"]["leaked_bytes"], rows["FooHeap"]["leaked_blocks"]) == (576, 9)
    assert rows["FooHeap"]["peak_bytes"] == 768
    summary = analyze(pool, "@snapshot:nine-foos", "summary")
    assert rows["system"]["leaked_bytes"] == summary["totals"]["in_use_at_exit_bytes"]


def test_pool_by_type_and_line_in_its_heap(pool):
    by_type = analyze(pool, "@snapshot:nine-foos", "top", "--heap", "FooHeap", "--by", "type")
    assert [(r["type"], r["allocations"], r["leaked_blocks"], r["leaked_bytes"])
            for r in by_type["rows"]] == [("Foo", 12, 9, 576)]
    assert by_type["capture"]["heap"] == "FooHeap"
    by_function = analyze(pool, "@snapshot:nine-foos", "top", "--heap", "FooHeap", "--by", "function")
    assert [(r["site"]["function"], r["leaked_bytes"]) for r in by_function["rows"]] == \
        [("FooPool::New(int)", 576)]
    leaks = analyze(pool, "@snapshot:nine-foos", "leaks", "--heap", "FooHeap")
    assert (leaks["leaked_bytes"], leaks["leaked_blocks"]) == (576, 9)
    functions = [f["function"] for f in leaks["leaks"][0]["stack"]]
    assert functions[:2] == ["[heap FooHeap]", "[type Foo]"] and "main" in functions
    # Inside the pool: slots 0..10 handed out, 3 and 7 back on the free list (11 is the last).
    layout = analyze(pool, "@snapshot:nine-foos", "map", "--heap", "FooHeap")
    assert [(r["blocks"], r["in_use_bytes"], r["span_bytes"], r["largest_gap"])
            for r in layout["regions"]] == [(9, 576, 11 * 64, 64)]


def test_container_allocator_reports_to_its_heap(pool):
    """memlens::HeapAllocator: the vector's one 128-byte block, typed with its element type."""
    by_type = analyze(pool, "@snapshot:nine-foos", "top", "--heap", "FooIndex", "--by", "type")
    assert [(r["type"], r["allocations"], r["leaked_bytes"]) for r in by_type["rows"]] == \
        [("Foo*", 1, 128)]
    index = heap_figures(analyze(pool, "@snapshot:nine-foos", "summary"), "FooIndex")
    assert (index["backing_blocks"], index["backing_bytes"]) == (1, 128)  # operator new's block
    by_line = analyze(pool, "@snapshot:nine-foos", "top", "--heap", "FooIndex", "--by", "line")
    assert [r["site"]["function"] for r in by_line["rows"]] == ["main"]  # past memlens.h


def test_arena_reset_releases_every_block(pool):
    full = analyze(pool, "@snapshot:arena-full", "top", "--heap", "ScratchArena", "--by", "type")
    assert [(r["type"], r["leaked_blocks"], r["leaked_bytes"]) for r in full["rows"]] == \
        [("(untyped)", 3, 600)]
    data = analyze(pool, "", "summary")
    arena = heap_figures(data, "ScratchArena")
    assert (arena["allocations"], arena["allocated_bytes"]) == (12, 4 * 600)
    assert (arena["resets"], arena["reset_blocks"], arena["frees"]) == (4, 12 + 0, 0)
    assert (arena["peak_blocks"], arena["peak_bytes"], arena["in_use_bytes"]) == (3, 600, 0)
    assert arena["destroyed"] and heap_figures(data, "FooHeap")["destroyed"]
    assert data["anomalies"]["total"] == 0
    # The figures of a heap, not the system heap's: --heap for every view.
    tree = analyze(pool, "@snapshot:arena-full", "tree", "--heap", "ScratchArena")
    assert tree["capture"]["heap"] == "ScratchArena"


def test_scoped_regions_are_begin_and_end_markers(pool):
    data = analyze(pool, "", "timeline")
    regions = [(m["name"], m["category"]) for m in data["markers"] if not m["snapshot"]]
    assert regions == [("round", "begin"), ("round", "end")] * 4
    assert [m["name"] for m in data["markers"] if m["snapshot"]] == ["nine-foos", "arena-full"]
    seqs = [m["seq"] for m in data["markers"]]
    assert seqs == sorted(seqs)


# --- a game loop with a marker per frame, leaking an Enemy every tenth frame ------------------

def test_growth_uses_the_frame_markers_and_names_the_stack(game):
    data = analyze(game, "", "leaks", "--growth")
    assert data["marker"] == "frame"
    assert len(data["checkpoints"]) == 8
    assert [g["site"]["function"] for g in data["growing"]] == ["SpawnEnemy(int)"]
    growing = data["growing"][0]
    assert growing["site"]["line"] == example_line("game_loop.cc", "spawn")
    # Checkpoints before frames 0, 14, 28, 42, 56, 70, 84, 99: enemies spawned by then.
    assert growing["bytes"] == [64 * n for n in (0, 1, 2, 4, 5, 7, 8, 9)]
    assert growing["in_use_at_end"] == 0  # freed at shutdown: a logical leak only
    # `new` is the agent's own operator new, whose frame no stack shows: the caller comes first.
    assert [f["function"] for f in growing["stack"]][0:3] == \
        ["SpawnEnemy(int)", "SimulateFrame(int)", "main"]


def test_snapshot_at_the_kth_marker_stops_exactly_there(game):
    for k, enemies in [(1, 0), (10, 0), (11, 1), (50, 4), (100, 9)]:
        data = analyze(game, f"@marker:frame#{k}", "top", "--by", "function", "--limit", "1000")
        rows = {r["site"]["function"]: r for r in data["rows"]}
        spawned = rows.get("SpawnEnemy(int)", {"allocations": 0, "leaked_bytes": 0})
        assert (spawned["allocations"], spawned["leaked_bytes"]) == (enemies, 64 * enemies), k
        # k-1 frames have finished: two scratch buffers each, none in use.
        frames = rows.get("SimulateFrame(int)", {"allocations": 0, "leaked_bytes": 0})
        assert (frames["allocations"], frames["leaked_bytes"]) == (2 * (k - 1), 0), k
        assert data["capture"]["snapshot"]["spec"] == f"marker:frame#{k}"
    first = analyze(game, "@marker:frame", "top")
    assert first["capture"]["snapshot"]["spec"] == "marker:frame"
    shutdown = analyze(game, "@marker:shutdown", "leaks")
    enemy_rows = [r for r in shutdown["leaks"] if r["site"]["function"] == "SpawnEnemy(int)"]
    assert [(r["blocks"], r["bytes"]) for r in enemy_rows] == [(10, 640)]


def test_timeline_lists_the_markers(game):
    data = analyze(game, "", "timeline")
    names = [m["name"] for m in data["markers"]]
    assert names == ["frame"] * 100 + ["shutdown"]
    assert all(m["category"] == "loop" for m in data["markers"][:100])
    text = memlens("timeline", game.capture)
    assert text.returncode == 0
    assert "marker frame (loop): 100 times" in text.stdout
    assert "marker shutdown: at" in text.stdout


@pytest.mark.parametrize("spec, message", [
    ("@marker:frme", "no marker named 'frme' in this capture (its markers: 'frame' (100 times), "
                     "'shutdown')"),
    ("@marker:frame#101", "marker 'frame' occurs 100 times in this capture (#1 to #100)"),
    ("@marker:frame#0", "the occurrence after '#' counts from 1"),
    ("@marker:", "a name is needed"),
    ("@snapshot:menu", "no snapshot named 'menu' in this capture (it has no snapshots)"),
])
def test_bad_marker_specifiers(game, spec, message):
    for command in ("top", "summary", "leaks", "timeline"):
        out = memlens(command, f"{game.capture}{spec}")
        assert out.returncode == 2, (command, out.stdout)
        assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    diff = memlens("diff", f"{game.capture}@marker:frame#1", f"{game.capture}{spec}")
    assert diff.returncode == 2 and message in diff.stderr


def test_unknown_heap_is_refused(pool, game):
    out = memlens("top", pool.capture, "--heap", "BarHeap")
    assert out.returncode == 2
    assert out.stderr == ("memlens: --heap BarHeap: no custom heap of that name in this capture "
                          "(its heaps: 'FooHeap', 'FooIndex', 'ScratchArena'; the system heap is the default)\n")
    out = memlens("summary", game.capture, "--heap", "FooHeap")
    assert out.returncode == 2 and "it has none" in out.stderr


def test_diff_between_two_markers(game):
    out = memlens("diff", f"{game.capture}@marker:frame#11", f"{game.capture}@marker:frame#31",
                  "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    rows = [r for r in data["rows"] if r["site"]["function"] == "SpawnEnemy(int)"]
    assert len(rows) == 1 and rows[0]["delta_bytes"] == 2 * 64


# --- misuse: counted, with the stack where it happened; never fatal ----------------------------

def test_misuse_is_counted_with_its_stack(record):
    recorded = record("heap_misuse")
    assert recorded.proc.returncode == 0 and recorded.proc.stdout == "done 1\n"
    data = recorded.analyze("summary")
    anomalies = data["anomalies"]
    assert {k: anomalies[k] for k in ("unknown_free", "double_free", "free_after_reset",
                                      "free_after_destroy", "name_reused", "total")} == {
        "unknown_free": 1, "double_free": 1, "free_after_reset": 1, "free_after_destroy": 1,
        "name_reused": 1, "total": 5}
    where = [(a["kind"], a["heap"], a["site"]["line"]) for a in anomalies["list"]]
    assert where == [
        ("double_free", "Blocks", line_of("heap_misuse.c", "double_free")),
        ("unknown_free", "Blocks", line_of("heap_misuse.c", "unknown_free")),
        ("free_after_reset", "Blocks", line_of("heap_misuse.c", "after_reset")),
        ("name_reused", "Blocks", line_of("heap_misuse.c", "name_reused")),
        ("free_after_destroy", "Blocks", line_of("heap_misuse.c", "after_destroy")),
    ]
    assert all(a["site"]["function"] == "main" for a in anomalies["list"])
    blocks = [h for h in data["custom_heaps"] if h["name"] == "Blocks"]
    assert [(h["allocations"], h["frees"], h["resets"], h["reset_blocks"]) for h in blocks] == \
        [(2, 1, 1, 1), (1, 0, 0, 1)]
    text = memlens("summary", recorded.capture)
    assert "Anomalies (misuse of custom heaps): 5" in text.stdout
    assert "double free, heap Blocks" in text.stdout


def test_misuse_program_runs_without_memlens():
    out = subprocess.run([str(PROGRAMS / "heap_misuse")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout == "done 0\n"


# --- Python: memlens.Heap, marker, region, snapshot --------------------------------------------

HOOKS = list((BUILD / "lib").glob("libmemlens_python*.so"))


@pytest.fixture(scope="module")
def python_heaps(tmp_path_factory, python):
    return record_example(tmp_path_factory, [python, str(REPO / "examples" / "python_heaps.py")],
                          env={"PYTHONPATH": str(REPO / "src" / "python")})


def test_python_api_is_a_no_op_without_memlens(python):
    out = subprocess.run([python, str(REPO / "examples" / "python_heaps.py")], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO / "src" / "python")))
    assert out.returncode == 0 and out.stdout == "done 30 False\n", out.stderr


def test_python_heap_figures(python_heaps):
    assert python_heaps.proc.stdout == "done 30 True\n"
    data = analyze(python_heaps, "@snapshot:after-frames", "summary")
    particles = heap_figures(data, "particles")
    assert (particles["allocations"], particles["frees"]) == (50, 20)
    assert (particles["in_use_blocks"], particles["in_use_bytes"]) == (30, 30 * 48)
    assert (particles["peak_blocks"], particles["peak_bytes"]) == (34, 34 * 48)
    end = analyze(python_heaps, "", "summary")
    scratch = heap_figures(end, "scratch")
    assert (scratch["allocations"], scratch["allocated_bytes"], scratch["peak_bytes"]) == (2, 5120, 5120)
    assert (scratch["resets"], scratch["in_use_bytes"], scratch["destroyed"]) == (1, 0, True)


@pytest.mark.skipif(not HOOKS, reason="built without Python headers: no Python frames to name")
def test_python_heap_blocks_at_their_python_line(python_heaps):
    data = analyze(python_heaps, "@snapshot:after-frames", "top", "--heap", "particles",
                   "--by", "line")
    assert [(r["site"]["file"].endswith("examples/python_heaps.py"), r["site"]["line"],
             r["leaked_bytes"]) for r in data["rows"]] == \
        [(True, example_line("python_heaps.py", "take"), 30 * 48)]
    by_type = analyze(python_heaps, "@snapshot:after-frames", "top", "--heap", "particles",
                      "--by", "type")
    assert [(r["type"], r["leaked_blocks"]) for r in by_type["rows"]] == [("Particle", 30)]


def test_python_markers_and_regions(python_heaps):
    data = analyze(python_heaps, "", "timeline")
    markers = [(m["name"], m["category"]) for m in data["markers"] if not m["snapshot"]]
    assert markers == [("frame", ""), ("update", "begin"), ("update", "end")] * 5
    third = analyze(python_heaps, "@marker:frame#3", "summary")
    assert heap_figures(third, "particles")["in_use_blocks"] == 2 * 6
