"""The snapshot index (CAPTURE.index): a snapshot resumed from one of its checkpoints, and a view
of the whole capture read from the index's end, must give exactly what a replay from the start
gives, on every view, for native, threaded, exec'ing and Python programs; a stale, damaged or
unwritable index must never change an answer. `memlens run` writes the index while the program
runs (the captures below are indexed that way)."""
import json
import os
import shutil
import stat
import subprocess

import pytest

from conftest import MEMLENS, PROGRAMS, memlens
# The Python program here checks the index, whose records are the same whatever the interpreter
# (test_python.py checks those records under each): the tests' own Python is enough.
from interpreters import TESTS_PYTHON

EXAMPLES = PROGRAMS.parent.parent / "examples"

# Tiny test programs have a few thousand events: checkpoints every 50 events or so.
SPACING = "50"
PROGRAMS_TO_INDEX = ["phases", "threads8", "exec_other", "realloc_chain", "mmap_anon",
                     "temporaries", "grows", "fifo_window"]
PYTHON_SCRIPT = """
import time
kept = []
for i in range(30000):
    kept.append(str(i) * 3)
time.sleep(0.05)
del kept[::2]
buffers = [bytearray(1000) for _ in range(2000)]
time.sleep(0.05)
"""


def run_view(args, index, env_extra=None):
    env = dict(os.environ)
    env.pop("MEMLENS_INDEX", None)
    env.update(env_extra or {})
    if index:
        env["MEMLENS_INDEX_SPACING"] = SPACING
    else:
        env["MEMLENS_INDEX"] = "0"
    out = subprocess.run([str(MEMLENS), *map(str, args)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    checkpoint = data["capture"]["snapshot"].pop("from_checkpoint_seq")
    return data, checkpoint


# memlens run indexes as the program runs, with the spacing of the test's checkpoints.
RUN_ENV = {**os.environ, "MEMLENS_INDEX_SPACING": SPACING}


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("indexed")
    found = {}
    for program in PROGRAMS_TO_INDEX:
        capture = folder / f"{program}.mlens"
        proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", str(PROGRAMS / program)],
                              capture_output=True, text=True, timeout=60, cwd=folder, env=RUN_ENV)
        assert capture.exists(), proc.stderr  # exec_other's exit status is its own (4)
        found[program] = capture
    script = folder / "objects.py"
    script.write_text(PYTHON_SCRIPT)
    capture = folder / "python.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", TESTS_PYTHON, str(script)],
                          capture_output=True, text=True, timeout=120, cwd=folder, env=RUN_ENV)
    assert proc.returncode == 0, proc.stderr
    found["python"] = capture
    # A sampled capture (weights in the saved state) and one with markers.
    capture = folder / "sampled.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "--sample-rate", "256", "-o", str(capture), "--",
                           str(PROGRAMS / "threads8")], capture_output=True, text=True, timeout=60,
                          cwd=folder, env={**RUN_ENV, "MEMLENS_SAMPLE_SEED": "7"})
    assert proc.returncode == 0, proc.stderr
    found["sampled"] = capture
    capture = folder / "game_loop.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", str(EXAMPLES / "game_loop")],
                          capture_output=True, text=True, timeout=60, cwd=folder, env=RUN_ENV)
    assert proc.returncode == 0, proc.stderr
    found["game_loop"] = capture
    return found


def moments(capture):
    """Snapshots spread over the capture, and its count of events."""
    data, _ = run_view(["summary", "--json", capture], index=False)
    duration = data["capture"]["duration_s"]
    return ["peak"] + [f"t={duration * f:.4f}" for f in (0.1, 0.35, 0.6, 0.85)], data["totals"]["events"]


@pytest.mark.parametrize("program", PROGRAMS_TO_INDEX + ["python", "sampled", "game_loop"])
def test_resumed_snapshots_equal_full_replays(captures, program):
    capture = captures[program]
    used_checkpoints = 0
    specs, events = moments(capture)
    if program == "game_loop":  # markers are exact places: the index must resume there too
        specs += ["marker:frame#3", "marker:frame#60", "marker:shutdown"]
    for spec in specs:
        for view in (["summary", "--json"], ["top", "--json", "--by", "line", "--limit", "10000"],
                     ["map", "--json"], ["histogram", "--json"]):
            expected, from_start = run_view([*view, f"{capture}@{spec}"], index=False)
            got, checkpoint = run_view([*view, f"{capture}@{spec}"], index=True)
            assert from_start == 0
            assert got == expected, f"{view[0]} {capture.name}@{spec} differs"
            used_checkpoints += checkpoint > 0
    # The equality above must have been tested on resumed replays, not only on fresh ones
    # (phases.c makes 41 events, too few for a checkpoint: there it checks the plain path).
    assert used_checkpoints > 0 or events < 4 * int(SPACING)
    assert capture.with_name(capture.name + ".index").exists()


@pytest.mark.parametrize("program", PROGRAMS_TO_INDEX + ["python", "sampled", "game_loop"])
def test_whole_capture_from_the_index_equals_a_full_replay(captures, program):
    """memlens run indexed the capture: views of the whole capture restore the index's end and
    read no chunk of the capture."""
    capture = captures[program]
    events = run_view(["summary", "--json", f"{capture}@end"], index=False)[0]["totals"]["events"]
    for argument in (capture, f"{capture}@end"):
        for view in (["summary", "--json"], ["top", "--json", "--by", "line", "--limit", "10000"],
                     ["top", "--json", "--by", "function"], ["map", "--json"],
                     ["leaks", "--json"], ["tree", "--json"], ["timeline", "--json"]):
            expected, from_start = run_view([*view, argument], index=False)
            got, from_index = run_view([*view, argument], index=True)
            # A Python program's default "exit" is the end of its own code (docs/python.md), a
            # moment before the capture's end: resumed from a checkpoint before it instead.
            whole = argument != capture or program != "python"
            assert from_start == 0, f"{view[0]} {argument}"
            assert (from_index == events) if whole else (0 < from_index < events), \
                f"{view[0]} {argument}"
            assert got == expected, f"{view[0]} {argument} differs"


def test_index_command_and_stale_index(captures, tmp_path):
    capture = tmp_path / "capture.mlens"
    shutil.copy(captures["threads8"], capture)
    out = memlens("index", "--json", capture, env={**os.environ, "MEMLENS_INDEX_SPACING": SPACING})
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["index"] == str(capture) + ".index" and info["checkpoints"] > 0
    assert info["index_bytes"] == (tmp_path / "capture.mlens.index").stat().st_size
    # The capture is replaced by another one: the old index must not be used for it.
    shutil.copy(captures["phases"], capture)
    expected, _ = run_view(["summary", "--json", f"{capture}@t=0.45"], index=False)
    got, _ = run_view(["summary", "--json", f"{capture}@t=0.45"], index=True)
    assert got == expected
    # A damaged index is ignored and rebuilt.
    index = tmp_path / "capture.mlens.index"
    index.write_bytes(index.read_bytes()[:-20])
    got, _ = run_view(["summary", "--json", f"{capture}@peak"], index=True)
    expected, _ = run_view(["summary", "--json", f"{capture}@peak"], index=False)
    assert got == expected


def test_index_goes_to_the_cache_when_it_cannot_sit_beside_the_capture(captures, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    capture = folder / "capture.mlens"
    shutil.copy(captures["threads8"], capture)
    # A read-only folder would do, but tests often run as root, who writes anyway: a folder
    # in the index's place blocks it as well.
    (folder / "capture.mlens.index").mkdir()
    if os.geteuid() != 0:
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    cache = tmp_path / "cache"
    try:
        got, checkpoint = run_view(["summary", "--json", f"{capture}@peak"], index=True,
                                   env_extra={"XDG_CACHE_HOME": str(cache)})
        expected, _ = run_view(["summary", "--json", f"{capture}@peak"], index=False)
        assert got == expected and checkpoint > 0
        assert len(list((cache / "memlens").glob("*.index"))) == 1
    finally:
        folder.chmod(stat.S_IRWXU)


def test_index_bad_input(tmp_path):
    missing = memlens("index", tmp_path / "nosuch.mlens")
    assert missing.returncode == 2 and "cannot open" in missing.stderr
    with_moment = memlens("index", str(tmp_path / "x.mlens") + "@peak")
    assert with_moment.returncode == 2 and "without @peak" in with_moment.stderr
    junk = tmp_path / "junk.mlens"
    junk.write_bytes(b"not a capture at all")
    out = memlens("index", junk)
    assert out.returncode == 2 and "junk.mlens" in out.stderr


def test_markers_resolve_from_the_index_as_from_the_capture(captures):
    capture = captures["game_loop"]
    assert memlens("index", capture).returncode == 0  # from here on, markers come from the index
    for spec in ["marker:frame#101", "marker:nosuch", "snapshot:frame"]:
        with_index = memlens("summary", f"{capture}@{spec}")
        without = memlens("summary", f"{capture}@{spec}", env={**os.environ, "MEMLENS_INDEX": "0"})
        assert with_index.returncode == without.returncode == 2
        assert with_index.stderr == without.stderr and f"@{spec}:" in with_index.stderr
    got, _ = run_view(["summary", "--json", f"{capture}@marker:frame#50"], index=True)
    expected, _ = run_view(["summary", "--json", f"{capture}@marker:frame#50"], index=False)
    assert got == expected
