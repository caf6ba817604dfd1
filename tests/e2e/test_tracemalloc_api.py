"""memlens.tracemalloc (issue 28), under every interpreter under test: CPython's own
Lib/test/test_tracemalloc.py run against it (tests/python/cpython_tracemalloc.py), and exact
figures of our own: known bytes at known lines in the Python and native domains, the same as the
standard module's for Python's allocator; get_traced_memory within tracemalloc's own tolerance;
DomainFilter keeping or dropping native memory. And the view it reads, `memlens blocks`, on a
native program's capture with exact blocks."""
import importlib.util
import json
import os
import re
import subprocess
import tarfile

import pytest

from conftest import BUILD, REPO, line_of, memlens
from interpreters import CACHE

RUNNER = REPO / "tests" / "python" / "cpython_tracemalloc.py"
SCRIPT = REPO / "tests" / "python" / "scripts" / "tracemalloc_lines.py"
# The tolerance CPython's test_get_traced_memory allows for the interpreter's own objects.
MAX_ERROR = 2048


def runner_module():
    spec = importlib.util.spec_from_file_location("cpython_tracemalloc", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def environment():
    path = os.pathsep.join([str(REPO / "src" / "python"), str(BUILD / "tests" / "python")])
    env = dict(os.environ, PYTHONPATH=path, MEMLENS_BUILD_DIR=str(BUILD))
    for name in ("PYTHONTRACEMALLOC", "LD_PRELOAD", "MEMLENS_OUTPUT"):
        env.pop(name, None)
    return env


def cpython_lib(python, tmp_path):
    """A Lib/ directory with test_tracemalloc.py and test.support for this interpreter: its own
    (None), or one extracted from its source tarball (an interpreter built without them)."""
    if python.has_module("test.test_tracemalloc") and python.has_module("test.support.script_helper"):
        return None
    version = "%d.%d" % python.version
    tarballs = sorted((CACHE / "src").glob(f"python{version}_*.orig.tar.*"))
    if not tarballs:
        pytest.fail(f"Python {python.tag} has no Lib/test and no source tarball is in "
                    f"{CACHE / 'src'} (tools/build-pythons keeps them)", pytrace=False)
    wanted = re.compile(r"^[^/]+/Lib/test/(__init__\.py|test_tracemalloc\.py|support/.*)$")
    with tarfile.open(tarballs[-1]) as archive:
        members = [m for m in archive.getmembers() if wanted.match(m.name)]
        for member in members:
            member.name = member.name.split("/", 1)[1]
        archive.extractall(tmp_path, members=members)
    return tmp_path / "Lib"


def test_cpython_test_tracemalloc_passes(python, tmp_path):
    lib = cpython_lib(python, tmp_path)
    report = tmp_path / "report.json"
    command = [python, str(RUNNER), "--report", str(report)] + (["--lib", str(lib)] if lib else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=environment())
    assert report.exists(), done.stderr[-4000:]
    tests = json.loads(report.read_text())["tests"]
    not_run = runner_module().not_run_reason
    failed = {t: o for t, o in tests.items() if o["outcome"] not in ("passed", "not run")}
    assert not failed, "\n".join(f"{t}: {o['outcome']}\n{o['detail']}" for t, o in failed.items())
    # Every test not run is one the runner lists with its reason; every other one ran and passed.
    for test_id, outcome in tests.items():
        assert (outcome["outcome"] == "not run") == bool(not_run(test_id)), test_id
    passed = [t for t, o in tests.items() if o["outcome"] == "passed"]
    public = [t for t in tests if ".TestCommandLine." not in t and ".TestCAPI." not in t]
    assert len(passed) == len(public) - sum(1 for t in public if not_run(t)), sorted(tests)
    assert len(passed) >= 31, passed  # 3.11: 48 tests, 17 of them not run
    assert done.returncode == 0, done.stderr[-4000:]


@pytest.fixture(scope="module")
def lines_seen():
    """What tracemalloc_lines.py prints with each module, by interpreter."""
    seen = {}

    def run(python, mode):
        if (python, mode) not in seen:
            done = subprocess.run([python, str(SCRIPT), mode], capture_output=True, text=True,
                                  timeout=300, env=environment())
            assert done.returncode == 0, done.stderr[-4000:]
            seen[python, mode] = json.loads(done.stdout)
        return seen[python, mode]
    return run


def script_line(marker):
    for number, text in enumerate(SCRIPT.read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# @{marker}"):
            return str(number)
    raise AssertionError(f"no @{marker} in {SCRIPT}")


def test_python_lines_as_the_standard_module_sees_them(python, lines_seen):
    ours, stdlib = lines_seen(python, "memlens"), lines_seen(python, "stdlib")
    for marker in ("blob", "words"):
        line = script_line(marker)
        assert ours["python"][line] == stdlib["python"][line], marker
    blob_bytes, _ = ours["python"][script_line("blob")]
    assert blob_bytes >= 1_000_001  # the buffer (the size and a NUL) and the object
    _, word_blocks = ours["python"][script_line("words")]
    assert word_blocks >= 1001  # 1000 strings and the list
    assert script_line("native") not in ours["python"]


def test_native_memory_in_its_own_domain(python, lines_seen):
    ours, stdlib = lines_seen(python, "memlens"), lines_seen(python, "stdlib")
    native = script_line("native")
    assert ours["native"][native] == [654_321, 1]
    assert native not in stdlib["python"]  # the standard module does not see malloc
    assert ours["domains"] == [0, 0x4D4C0001]
    # DomainFilter(False, NATIVE_DOMAIN) drops it and keeps every Python line.
    assert native not in ours["without_native"]
    assert ours["without_native"] == ours["python"]


def test_traced_memory_within_tracemalloc_tolerance(python, lines_seen):
    ours = lines_seen(python, "memlens")
    expected = ours["python_bytes"] + 3_000_000
    current, peak = ours["traced"]
    assert expected <= current <= expected + MAX_ERROR
    assert current <= peak <= expected + MAX_ERROR
    current_after, peak_after = ours["traced_after_del"]
    assert 3_000_000 <= current_after <= 3_000_000 + MAX_ERROR  # the native block stays
    assert peak_after >= peak
    assert ours["traced_after_stop"] == [0, 0]


def test_blocks_view_lists_each_block_with_its_stack(record):
    """`memlens blocks`: every block in use, exact sizes at the marked stacks, totals by domain."""
    recorded = record("leak_two_paths")
    answer = recorded.analyze("blocks")
    sizes = [b["size"] for b in answer["blocks"]]
    assert answer["in_use_bytes"] == sum(sizes) and answer["in_use_blocks"] == len(sizes)
    assert answer["domains"]["native"] == {"bytes": sum(sizes), "blocks": len(sizes)}
    assert answer["domains"]["python"] == {"bytes": 0, "blocks": 0}
    stacks = {s["id"]: s["frames"] for s in answer["stacks"]}
    by_path = {}
    for block in answer["blocks"]:
        lines = [f["line"] for f in stacks[block["stack"]] if f["file"].endswith("leak_two_paths.c")]
        by_path.setdefault(tuple(lines[:2]), []).append(block["size"])
    make = line_of("leak_two_paths.c", "make_block")
    assert by_path.pop((make, line_of("leak_two_paths.c", "path_a"))) == [100] * 3
    assert by_path.pop((make, line_of("leak_two_paths.c", "path_b"))) == [100] * 5
    assert all(make not in lines for lines in by_path), by_path  # the freed block is not listed
    # --containing: the one block holding an address inside it.
    block = answer["blocks"][0]
    inside = recorded.analyze("blocks", "--containing", str(block["address"] + block["size"] - 1))
    assert [b["address"] for b in inside["blocks"]] == [block["address"]]
    totals = recorded.analyze("blocks", "--totals")
    assert totals["in_use_bytes"] == answer["in_use_bytes"] and "blocks" not in totals


def test_blocks_peak_since_a_marker_or_an_event(record):
    recorded = record("peak_reset")
    answer = recorded.analyze("blocks", "--peak-since-marker", "reset")
    assert len([b for b in answer["blocks"] if b["size"] == 30000]) == 1
    baseline = answer["in_use_bytes"] - 30000  # what the C runtime keeps, if anything
    marker_seq = answer["peak_since"]["seq"]
    assert marker_seq > 0 and answer["next_seq"] > marker_seq
    assert answer["peak_since"]["bytes"] == baseline + 30000 + 20000
    assert answer["peak_bytes"] == baseline + 100000
    # The same window from the marker's sequence number; one from after the last event holds
    # what is in use at the end.
    since_seq = recorded.analyze("blocks", "--totals", "--peak-since-seq", str(marker_seq))
    assert since_seq["peak_since"] == {"marker": "", "seq": marker_seq,
                                       "bytes": baseline + 30000 + 20000}
    after = recorded.analyze("blocks", "--totals", "--peak-since-seq", str(answer["next_seq"]))
    assert after["peak_since"]["bytes"] == answer["in_use_bytes"]
    # No such marker: the peak since the start.
    whole = recorded.analyze("blocks", "--totals", "--peak-since-marker", "no-such-marker")
    assert whole["peak_since"] == {"marker": "no-such-marker", "seq": 0, "bytes": baseline + 100000}


def test_blocks_bad_input_is_one_line(tmp_path):
    done = memlens("blocks", str(tmp_path / "missing.mlens"), "--json")
    assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
