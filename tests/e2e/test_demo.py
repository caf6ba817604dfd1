"""The example tools/demo records (examples/session_server.cc) tells the story README.md
promises: its peak, its leak and its logical leak, each at its own line with exact figures, and
nothing of the C/C++ runtime among the leaks."""
import re
import subprocess

from conftest import BUILD, MEMLENS, REPO, Recorded, memlens

SOURCE = "session_server.cc"
KIB = 1024


def example_line(marker):
    for number, text in enumerate((REPO / "examples" / SOURCE).read_text().splitlines(), start=1):
        if re.search(r"// @" + re.escape(marker) + r"\b", text):
            return number
    raise AssertionError(f"no @{marker} in examples/{SOURCE}")


def at(rows, marker):
    line = example_line(marker)
    return [r for r in rows if r["site"]["file"].endswith("/" + SOURCE) and r["site"]["line"] == line]


def test_the_demo_shows_a_peak_a_leak_and_a_growing_cache(tmp_path):
    capture = tmp_path / "example.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--",
                           str(BUILD / "examples" / "session_server")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # 400 requests; every 25th names no session; the snapshot at request 200 copies the 192
    # sessions seen by then, 2 KiB each.
    assert proc.stdout == "served 384 requests, rejected 16, wrote a snapshot of 393216 bytes\n"
    run = Recorded(proc, capture)

    # The peak: the 8 MiB snapshot buffer is the top site, with the 192 sessions cached then
    # (a map node and a 2 KiB string each) and the 8 request bodies leaked by then.
    summary = run.analyze("summary")
    top = summary["top_peak"]
    assert at(top[:1], "snapshot") and (top[0]["peak_bytes"], top[0]["peak_blocks"]) == (8 << 20, 1)
    [session] = at(top, "session")
    assert (session["peak_blocks"], session["allocations"], session["leaked_bytes"]) == \
        (2 * 192, 2 * 384, 0)
    [body_at_peak] = at(top, "body")
    assert (body_at_peak["peak_bytes"], body_at_peak["peak_blocks"]) == (8 * 4 * KIB, 8)

    # The leak: 16 bodies of 4 KiB at their line, the only thing left but the runtime's.
    totals = summary["totals"]
    assert (totals["in_use_at_exit_bytes"], totals["in_use_at_exit_blocks"]) == (16 * 4 * KIB, 16)
    leaks = run.analyze("leaks")
    assert [(l["bytes"], l["blocks"], l["allocations"], l["site"]["line"]) for l in leaks["leaks"]] \
        == [(16 * 4 * KIB, 16, 400, example_line("body"))]
    assert {r["rule"] for r in leaks["runtime"]["rules"]} >= {"libstdc++-init", "stdio-buffers"}

    # The logical leak: the cache grows from one checkpoint to the next, and is gone at exit.
    growing = run.analyze("leaks", "--growth")["growing"]
    assert at(growing[:1], "session"), growing[0]["site"]
    cache = growing[0]
    assert cache["in_use_at_end"] == 0 and cache["growth_bytes"] > 100 * KIB
    assert all(a < b for a, b in zip(cache["bytes"], cache["bytes"][1:])), cache["bytes"]

    text = memlens("summary", capture)
    assert text.returncode == 0, text.stderr
    assert re.search(r"\n  at exit +64\.00 KiB in 16 blocks still allocated at exit\n", text.stdout)
    assert "kept by the C/C++ runtime for the life of the process (not leaks)" in text.stdout
