"""'At exit' for a Python program is the end of its own code (docs/python.md): a module-level
list the interpreter's shutdown frees is in use at exit, exact, at its line, in summary, leaks,
top and tree; the end of the process stays reachable as CAPTURE@end."""
import json
import re
import subprocess

import pytest

from conftest import BUILD, MEMLENS, REPO, Recorded, memlens

SCRIPTS = REPO / "tests" / "python" / "scripts"
SCRIPT = "program_end.py"
HOOKS = list((BUILD / "lib").glob("libmemlens_python*.so"))
pytestmark = pytest.mark.skipif(not HOOKS, reason="memlens was built without Python headers, "
                                "so there are no Python hooks to test")
ITEMS = 1000


def line_of(marker):
    for number, text in enumerate((SCRIPTS / SCRIPT).read_text().splitlines(), start=1):
        if f"# @{marker}" in text:
            return number
    raise AssertionError(f"no @{marker} in {SCRIPT}")


def list_header(python):
    """What a list's item array holds beyond its items (sys.getsizeof counts only those): a
    free-threaded build puts an 8-byte header before it (docs/python.md, "Versions")."""
    return 8 if python.free_threaded else 0


def record(python, tmp_path, how):
    capture = tmp_path / f"{how}.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", python,
                           str(SCRIPTS / SCRIPT), how],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.stdout.count("\n") == 1, (proc.stdout, proc.stderr)
    item, array = map(int, proc.stdout.split())
    return Recorded(proc, capture), item, array


def in_use_at(recorded, marker, spec=""):
    """Bytes in use at the marked line of the script (top --by line), at CAPTURE[spec]."""
    line = line_of(marker)
    out = subprocess.run([str(MEMLENS), "top", str(recorded.capture) + spec, "--json", "--by",
                          "line", "--limit", "100000"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return sum(r["leaked_bytes"] for r in json.loads(out.stdout)["rows"]
               if r["site"]["file"].endswith("/" + SCRIPT) and r["site"]["line"] == line)


def assert_list_in_use_at_exit(recorded, expected):
    """The list's bytes at its line, in use at exit, in every view that says so."""
    assert in_use_at(recorded, "append") == expected
    summary = recorded.analyze("summary", "--limit", "1000")
    assert summary["capture"]["snapshot"]["spec"] == "program-end"
    assert summary["capture"]["snapshot"]["label"] == "exit"
    assert summary["capture"]["snapshot"]["program_end_s"] == \
        summary["capture"]["snapshot"]["time_s"]
    sites = [s for s in summary["top_in_use_at_exit"]
             if s["site"]["file"].endswith("/" + SCRIPT) and s["site"]["line"] == line_of("append")]
    assert sum(s["leaked_bytes"] for s in sites) == expected
    assert summary["totals"]["in_use_at_exit_bytes"] >= expected
    leaks = recorded.analyze("leaks", "--limit", "100000")["leaks"]
    at_line = [l for l in leaks
               if any(f["python"] and f["file"].endswith("/" + SCRIPT) and f["line"] == line_of("append")
                      for f in l["stack"])]
    assert sum(l["bytes"] for l in at_line) == expected
    text = memlens("summary", recorded.capture).stdout
    assert re.search(r"^ *exit +the end of the program's own Python code", text, re.M), text
    for command in ("leaks", "top", "tree"):
        assert "Note: exit is the end of the program's own Python code" in \
            memlens(command, recorded.capture).stdout


def test_module_list_is_in_use_at_exit_when_the_code_returns(python, tmp_path):
    r, item, array = record(python, tmp_path, "return")
    assert r.proc.returncode == 0, r.proc.stderr
    assert item == python.size_of("bytes(10_000)") and array > 0
    assert_list_in_use_at_exit(r, ITEMS * item + array + list_header(python))
    # The tree's in-use figures are the same moment's.
    tree = r.analyze("tree", "--metric", "leaked", "--min-percent", "0")
    assert tree["capture"]["snapshot"]["spec"] == "program-end"
    # The end of the process, after the interpreter's shutdown, is still there under @end.
    assert in_use_at(r, "append", "@end") == 0
    process_end = Recorded(r.proc, str(r.capture) + "@end").analyze("summary")["capture"]["snapshot"]
    assert process_end["spec"] == "end" and process_end["label"] == "the end of the process"
    assert "Note: exit" not in memlens("top", str(r.capture) + "@end").stdout
    explicit = Recorded(r.proc, str(r.capture) + "@program-end").analyze("summary")
    assert explicit["capture"]["snapshot"]["spec"] == "program-end"
    assert explicit["capture"]["snapshot"]["label"].startswith("program-end (")
    assert in_use_at(r, "append", "@program-end") == ITEMS * item + array + list_header(python)


def test_sys_exit_from_a_function_ends_the_program_code(python, tmp_path):
    r, item, array = record(python, tmp_path, "exit")
    assert r.proc.returncode == 3, r.proc.stderr  # the exit status is the program's
    assert_list_in_use_at_exit(r, ITEMS * item + array + list_header(python))


def test_an_uncaught_exception_ends_the_program_code(python, tmp_path):
    r, item, array = record(python, tmp_path, "raise")
    assert r.proc.returncode == 1
    assert "RuntimeError: the program's own error" in r.proc.stderr
    assert_list_in_use_at_exit(r, ITEMS * item + array + list_header(python))


def test_an_atexit_handler_runs_after_exit_and_before_the_process_end(python, tmp_path):
    r, item, array = record(python, tmp_path, "atexit")
    assert r.proc.returncode == 0, r.proc.stderr
    assert_list_in_use_at_exit(r, ITEMS * item + array + list_header(python))
    assert in_use_at(r, "atexit_malloc") == 0  # not yet at exit
    assert in_use_at(r, "atexit_malloc", "@end") == 1_000_000


def test_a_forked_child_running_to_sys_exit_ends_only_its_own_code(python, tmp_path):
    """The child is not recorded (docs/agent.md): its sys.exit must not end the parent's code,
    whose list grows again after the child is gone."""
    r, item, array = record(python, tmp_path, "fork")
    assert r.proc.returncode == 0, r.proc.stderr
    assert in_use_at(r, "append") == ITEMS * item
    assert in_use_at(r, "after_fork") == ITEMS * item + array + list_header(python)
    assert in_use_at(r, "child") == 0
    assert r.analyze("summary")["capture"]["snapshot"]["spec"] == "program-end"


def test_without_an_end_of_the_program_code_exit_is_the_process_end(python, tmp_path):
    r, item, array = record(python, tmp_path, "os_exit")
    assert r.proc.returncode == 0, r.proc.stderr
    snapshot = r.analyze("summary")["capture"]["snapshot"]
    assert snapshot["spec"] == "end" and snapshot["program_end_s"] is None
    assert in_use_at(r, "append") == ITEMS * item + array + list_header(python)  # no shutdown freed it
    assert "Note: exit" not in memlens("top", r.capture).stdout
    out = memlens("summary", str(r.capture) + "@program-end")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "@program-end: this capture has no end" in out.stderr


def test_a_native_program_has_no_end_of_program_code(record):
    r = record("known_peak")
    snapshot = r.analyze("summary")["capture"]["snapshot"]
    assert snapshot["spec"] == "end" and snapshot["program_end_s"] is None


@pytest.mark.parametrize("how", ["-c", "-m", "stdin"])
def test_every_way_to_give_the_main_code_records_its_end(python, tmp_path, how):
    """-c, -m and a script on stdin raise their own cpython.run_* event: each has the moment,
    and the list the code keeps is in use at exit."""
    code = "kept = [bytes(10_000) for _ in range(100)]\nprint(len(kept))\n"
    (tmp_path / "keeper.py").write_text(code)
    args = {"-c": ["-c", code], "-m": ["-m", "keeper"], "stdin": ["-"]}[how]
    capture = tmp_path / "how.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", python, *args],
                          input=code if how == "stdin" else None, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "100\n", proc.stderr
    summary = Recorded(proc, capture).analyze("summary")
    assert summary["capture"]["snapshot"]["spec"] == "program-end"
    assert summary["totals"]["in_use_at_exit_bytes"] >= 100 * python.size_of("bytes(10_000)")
