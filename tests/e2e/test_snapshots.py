"""Snapshots at a moment (FILE@t=..., @peak, @end), diffs between two of them, and the
timeline, on a program with three phases 300 ms apart (tests/programs/phases.c)."""
import json
import subprocess

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, line_of, memlens

MiB = 1 << 20


@pytest.fixture(scope="module")
def phases(tmp_path_factory):
    capture = tmp_path_factory.mktemp("phases") / "phases.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", str(PROGRAMS / "phases")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "done\n"
    return Recorded(proc, capture)


def in_use_at(recorded, spec, marker):
    """Bytes in use at the marked line of phases.c at the snapshot, and the snapshot."""
    line = line_of("phases.c", marker)
    out = memlens("top", f"{recorded.capture}@{spec}", "--json", "--by", "line", "--limit", "1000")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    found = [r for r in data["rows"] if r["site"]["file"].endswith("phases.c") and r["site"]["line"] == line]
    return (found[0]["leaked_bytes"] if found else 0), data["capture"]["snapshot"]


@pytest.mark.parametrize("spec, a, b", [
    ("t=0.15", 10 * MiB, 0),       # inside phase A
    ("t=0.45s", 10 * MiB, 20 * MiB),  # both phases: the peak's plateau
    ("t=0.75", 0, 20 * MiB),       # phase A freed
    ("peak", 10 * MiB, 20 * MiB),
    ("end", 0, 20 * MiB),
])
def test_snapshot_at_a_moment(phases, spec, a, b):
    a_bytes, snapshot = in_use_at(phases, spec, "phase_a")
    b_bytes, _ = in_use_at(phases, spec, "phase_b")
    assert (a_bytes, b_bytes) == (a, b)
    assert snapshot["spec"] == spec
    if spec.startswith("t="):  # the snapshot lands within a few ms after the time asked for
        asked = float(spec[2:].rstrip("s"))
        assert asked <= snapshot["time_s"] < asked + 0.05


def test_summary_at_the_peak(phases):
    out = memlens("summary", f"{phases.capture}@peak", "--json")
    data = json.loads(out.stdout)
    assert data["totals"]["in_use_at_exit_bytes"] == 30 * MiB  # in use at the snapshot
    assert data["totals"]["peak_bytes"] == 30 * MiB
    assert 0.3 <= data["capture"]["snapshot"]["time_s"] < 0.6


def test_diff_between_two_phases(phases):
    out = memlens("diff", f"{phases.capture}@t=0.15", f"{phases.capture}@t=0.45", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["delta_bytes"] == 20 * MiB
    top = data["rows"][0]
    assert top["site"]["function"] == "phase_b" and top["status"] == "new"
    assert (top["delta_bytes"], top["delta_blocks"], top["before_bytes"]) == (20 * MiB, 20, 0)
    out = json.loads(memlens("diff", f"{phases.capture}@t=0.45", f"{phases.capture}@t=0.75",
                             "--json").stdout)
    gone = [r for r in out["rows"] if r["site"]["function"] == "phase_a"]
    assert len(gone) == 1 and gone[0]["status"] == "gone" and gone[0]["delta_bytes"] == -10 * MiB
    text = memlens("diff", f"{phases.capture}@t=0.15", f"{phases.capture}@t=0.45").stdout
    assert "+20.00 MiB" in text and "new" in text and "phase_b" in text


def test_diff_between_two_captures(phases, record):
    other = record("leak_two_paths")
    out = json.loads(memlens("diff", phases.capture, other.capture, "--json", "--limit", "1000").stdout)
    functions = {r["site"]["function"]: r for r in out["rows"]}
    assert functions["phase_b"]["status"] == "gone" and functions["phase_b"]["delta_bytes"] == -20 * MiB
    assert functions["make_block"]["status"] == "new" and functions["make_block"]["delta_bytes"] == 800
    same = json.loads(memlens("diff", phases.capture, phases.capture, "--json").stdout)
    assert same["rows"] == [] and same["delta_bytes"] == 0


def test_timeline_shows_the_phases_and_resident_memory(phases):
    data = json.loads(memlens("timeline", phases.capture, "--json").stdout)
    heap = data["heap"]
    assert max(p["bytes"] for p in heap) == 30 * MiB == data["peak"]["bytes"]
    assert 0.3 <= data["peak"]["time_s"] < 0.6
    quiet_a = [p["bytes"] for p in heap if 0.05 < p["time_s"] < 0.25]
    quiet_c = [p["bytes"] for p in heap if 0.7 < p["time_s"] < 0.85]
    assert quiet_a and all(b == 10 * MiB for b in quiet_a)
    assert quiet_c and all(b == 20 * MiB for b in quiet_c)
    resident = data["resident"]
    assert len(resident) >= 20  # sampled every 10 ms over about 0.9 s
    assert max(s["bytes"] for s in resident) >= 30 * MiB  # the phases wrote every byte
    chart = memlens("timeline", phases.capture).stdout
    assert "peak 30.00 MiB" in chart and "#" in chart


@pytest.mark.parametrize("spec, message", [
    ("t=-1", "must be a number of seconds"),
    ("t=abc", "must be a number of seconds"),
    ("t=99", "is after the end of the capture"),
    ("marker:nosuch", "has no markers"),
])
def test_bad_snapshot_specifiers(phases, spec, message):
    for command in ("summary", "top", "leaks", "tree", "timeline"):
        out = memlens(command, f"{phases.capture}@{spec}")
        assert out.returncode == 2 and out.stderr.startswith("memlens: ") and message in out.stderr
    out = memlens("diff", f"{phases.capture}@{spec}", phases.capture)
    assert out.returncode == 2 and message in out.stderr
