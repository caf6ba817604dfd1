"""`memlens run` indexes the capture while the program runs (a low-priority thread replays it as
it is written): afterwards every view of the whole capture restores the index's end instead of
replaying, and must answer exactly what a replay answers."""
import json
import os
import subprocess

from conftest import MEMLENS, PROGRAMS, REPO, memlens, record_killed
# The Python program here checks the index, whose records are the same whatever the interpreter
# (test_python.py checks those records under each): the tests' own Python is enough.
from interpreters import TESTS_PYTHON


def view(*args, index=True):
    env = dict(os.environ)
    env.pop("MEMLENS_INDEX", None)
    if not index:
        env["MEMLENS_INDEX"] = "0"
    out = memlens(*args, "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return data, data["capture"]["snapshot"].pop("from_checkpoint_seq")


def run(capture, *program, extra=(), env=None):
    proc = subprocess.run([str(MEMLENS), "run", *extra, "-o", str(capture), "--", *map(str, program)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_run_writes_the_index_and_the_summary_reads_its_end(tmp_path):
    capture = tmp_path / "peak.mlens"
    run(capture, PROGRAMS / "known_peak")
    assert (tmp_path / "peak.mlens.index").is_file()
    got, from_index = view("summary", capture)
    expected, from_start = view("summary", capture, index=False)
    assert got == expected
    assert from_start == 0 and from_index == got["totals"]["events"] > 0
    # The figures themselves: ten 1 MiB blocks at once, all freed.
    assert got["totals"]["peak_bytes"] == 10 * (1 << 20) and got["totals"]["in_use_at_exit_bytes"] == 0


def test_no_index_when_asked(tmp_path):
    capture = tmp_path / "plain.mlens"
    run(capture, PROGRAMS / "known_peak", extra=["--no-index"])
    run(tmp_path / "env.mlens", PROGRAMS / "known_peak", env={**os.environ, "MEMLENS_INDEX": "0"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.mlens", "plain.mlens"]
    _, from_start = view("summary", capture)
    assert from_start == 0
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"))
    script = tmp_path / "script.py"
    script.write_text("x = [str(i) for i in range(1000)]\n")
    proc = subprocess.run([TESTS_PYTHON, "-m", "memlens", "run", "--no-index", "-o",
                           str(tmp_path / "py.mlens"), str(script)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "py.mlens").is_file() and not (tmp_path / "py.mlens.index").exists()


def test_a_capture_under_the_threshold_is_not_indexed(tmp_path):
    """Indexing a small capture would cost a short run more than it ever saves a view: by
    default only captures past 2 MiB are indexed while they are written."""
    default = {k: v for k, v in os.environ.items() if k != "MEMLENS_INDEX_MIN_BYTES"}
    small = tmp_path / "small.mlens"
    run(small, PROGRAMS / "known_peak", env=default)
    assert small.stat().st_size < 2 << 20
    assert not (tmp_path / "small.mlens.index").exists()
    # Past the threshold it is: the same program with the threshold under its capture's size.
    past = tmp_path / "past.mlens"
    run(past, PROGRAMS / "known_peak", env={**default, "MEMLENS_INDEX_MIN_BYTES": "100"})
    assert past.stat().st_size > 100 and (tmp_path / "past.mlens.index").is_file()
    got, from_index = view("summary", past)
    assert from_index > 0 and got["totals"]["peak_bytes"] == 10 * (1 << 20)


def test_a_reused_output_path_is_indexed_for_this_run_only(tmp_path):
    """The file is emptied before the program starts: the indexer never reads the old capture."""
    capture = tmp_path / "same.mlens"
    run(capture, PROGRAMS / "threads8")
    run(capture, PROGRAMS / "known_peak")
    got, from_index = view("summary", capture)
    expected, _ = view("summary", capture, index=False)
    assert got == expected and from_index > 0
    assert got["process"]["argv"] == [str(PROGRAMS / "known_peak")]


def test_a_killed_program_is_indexed_as_far_as_it_got(tmp_path):
    capture = tmp_path / "killed.mlens"
    record_killed(capture)
    got, from_index = view("summary", capture)
    expected, _ = view("summary", capture, index=False)
    assert got == expected and from_index > 0
    # memlens run hosts the writer: it drains what the program left and ends the capture.
    assert got["capture"]["complete"] and got["capture"]["end_reason"] == "signal"
    assert got["totals"]["in_use_at_exit_bytes"] >= 888
