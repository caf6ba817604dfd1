"""Sampling mode (`memlens run --sample`, docs/sampling.md): estimates from sampled captures of
programs with known allocations, against the exact figures and against full tracing of the same
program; the capture and every view saying that the figures are estimates; frees recorded only
for sampled blocks; bad rates refused; a Python program."""
import math
import os
import re
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, REPO, Recorded, memlens
from test_python import HOOKS, SCRIPTS

MiB = 1 << 20
DEFAULT_RATE = 32 * 1024
SEED = "20261121"  # fixed: the same samples every run

# tests/programs/sampled_known.c
BIG = 16384 * 64 * 1024          # allocated at @big
BIG_LIVE = 2048 * 64 * 1024      # live at the peak and at exit
SMALL = 3_125_000 * 32           # allocated at @small, all live at the peak
SMALL_LEFT = SMALL * 3 // 4      # never freed
INDEX = 3_125_000 * 8            # @small_index, never freed
MEDIUM = 5120 * 4096             # allocated at @medium, each freed at once


def record(tmp_path, program, *options, seed=SEED, args=(), name=None, env_extra=None):
    capture = tmp_path / f"{name or program}.mlens"
    env = dict(os.environ, MEMLENS_SAMPLE_SEED=seed, **(env_extra or {}))
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), *options, "--",
                           str(PROGRAMS / program), *args],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return Recorded(proc, capture)


def close(estimate, exact, tolerance=0.05):
    return abs(estimate - exact) <= tolerance * exact


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """sampled_known recorded sampled at the default rate, and in full."""
    tmp = tmp_path_factory.mktemp("sampling")
    return record(tmp, "sampled_known", "--sample"), record(tmp, "sampled_known", name="full")


def site(recorded, marker):
    return recorded.row_at("sampled_known.c", marker)


def test_estimates_land_within_5_percent_at_the_default_rate(known):
    sampled, full = known
    summary = sampled.analyze("summary")
    assert summary["capture"]["estimates"] is True
    assert summary["capture"]["sample_rate"] == DEFAULT_RATE
    exact = full.analyze("summary")["totals"]
    assert exact["allocated_bytes"] >= BIG + SMALL + INDEX + MEDIUM  # the runtime adds a little
    totals = summary["totals"]
    for key in ("allocated_bytes", "peak_bytes", "in_use_at_exit_bytes"):
        assert close(totals[key], exact[key]), (key, totals[key], exact[key])
    big, small = site(sampled, "big"), site(sampled, "small")
    assert close(big["allocated_bytes"], BIG)
    assert close(big["peak_bytes"], BIG_LIVE) and close(big["leaked_bytes"], BIG_LIVE)
    assert close(big["allocations"], 16384) and close(big["leaked_blocks"], 2048)
    assert close(small["allocated_bytes"], SMALL)
    assert close(small["peak_bytes"], SMALL)
    assert close(small["leaked_bytes"], SMALL_LEFT)
    assert close(small["allocations"], 3_125_000)
    assert close(small["leaked_blocks"], 3_125_000 * 3 // 4)
    # Blocks far larger than the rate are all but certainly recorded, and weigh almost nothing
    # more than their size.
    index = site(sampled, "small_index")
    assert (index["allocations"], index["allocated_bytes"]) == (1, INDEX)
    # The sample is small: the point of sampling.
    assert sampled.analyze("summary")["totals"]["events"] < full.analyze("summary")["totals"]["events"] / 20


JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def test_estimates_hold_in_front_of_jemalloc(known, tmp_path):
    """With jemalloc behind the agent, an unsampled call takes the guarded short path (counted
    down, then jemalloc under the guard, no call into the recorder) instead of the C library's
    direct one. It must count the same bytes: the sites' estimates land within 5% of the known
    figures, and of full tracing under glibc, and jemalloc's own mappings stay out."""
    if not os.path.exists(JEMALLOC):
        pytest.skip(f"{JEMALLOC} is not installed (Debian: libjemalloc2)")
    sampled = record(tmp_path, "sampled_known", "--sample", name="jemalloc",
                     env_extra={"LD_PRELOAD": JEMALLOC})
    exact = known[1].analyze("summary")["totals"]
    totals = sampled.analyze("summary")["totals"]
    for key in ("allocated_bytes", "peak_bytes", "in_use_at_exit_bytes"):
        assert close(totals[key], exact[key]), (key, totals[key], exact[key])
    assert totals["mappings"]["in_use_bytes"] == 0
    big, small = site(sampled, "big"), site(sampled, "small")
    assert close(big["allocated_bytes"], BIG) and close(big["leaked_bytes"], BIG_LIVE)
    assert close(small["allocated_bytes"], SMALL) and close(small["leaked_bytes"], SMALL_LEFT)
    assert close(small["allocations"], 3_125_000)
    assert totals["events"] < exact["events"] / 20


def test_full_tracing_of_the_same_program_is_exact(known):
    _, full = known
    assert full.analyze("summary")["capture"]["estimates"] is False
    assert full.analyze("summary")["capture"]["sample_rate"] is None
    big, small = site(full, "big"), site(full, "small")
    assert (big["allocated_bytes"], big["leaked_bytes"], big["leaked_blocks"]) == (BIG, BIG_LIVE, 2048)
    assert (small["allocated_bytes"], small["peak_bytes"], small["leaked_bytes"]) == (
        SMALL, SMALL, SMALL_LEFT)


def test_top_sites_rank_as_in_full_mode(known):
    sampled, full = known
    for sort, key in (("allocated", "allocated_bytes"), ("peak", "peak_bytes"),
                      ("leaked", "leaked_bytes")):
        ranks = []
        for r in (sampled, full):
            rows = r.analyze("top", "--by", "line", "--sort", sort, "--limit", "4")["rows"]
            ranks.append([row["site"]["line"] for row in rows
                          if row["site"]["file"].endswith("sampled_known.c") and row[key] > 0])
        assert ranks[0] == ranks[1], (sort, ranks)
        assert len(ranks[0]) >= 3


def test_every_view_says_the_figures_are_estimates(known, tmp_path):
    sampled, full = known
    note = "Estimates: heap allocations were sampled (one byte in 32.00 KiB"
    for view in (["summary"], ["top"], ["tree"], ["leaks"], ["timeline"], ["histogram"],
                 ["temporary"], ["map"]):
        out = memlens(view[0], sampled.capture)
        assert out.returncode == 0, (view, out.stderr)
        assert note in out.stdout, (view, out.stdout[:300])
        exact = memlens(view[0], full.capture)
        assert "Estimates" not in exact.stdout, view
        js = sampled.analyze(view[0])
        assert js["capture"]["estimates"] is True, view
    diff = memlens("diff", full.capture, sampled.capture)
    assert diff.returncode == 0, diff.stderr
    assert "Estimates: the second capture sampled" in diff.stdout
    report = tmp_path / "report.html"
    out = memlens("report", sampled.capture, "-o", report)
    assert out.returncode == 0, out.stderr
    assert '"estimates":true' in report.read_text()


def test_a_free_is_recorded_only_for_a_sampled_block(tmp_path):
    """known_peak frees every block it allocates: in a sampled capture there are exactly as
    many frees as sampled blocks, and nothing is left in use."""
    r = record(tmp_path, "known_peak", "--sample-rate", "1M")
    rows = [row for row in r.analyze("top", "--by", "line", "--limit", "1000")["rows"]
            if row["site"]["file"].endswith("known_peak.c")]
    assert rows and all(row["leaked_bytes"] == 0 for row in rows)
    totals = r.analyze("summary")["totals"]
    # 13 blocks of 1-2 MiB at one in 1 MiB: sampled with probability 0.63-0.86 each.
    assert 0 < totals["events"] < 2 * 13 + 200


def test_the_same_seed_gives_the_same_samples(tmp_path):
    one = record(tmp_path, "churn_single", "--sample-rate", "4K", name="one")
    two = record(tmp_path, "churn_single", "--sample-rate", "4K", name="two")
    other = record(tmp_path, "churn_single", "--sample-rate", "4K", name="other", seed="7")
    totals = [r.analyze("summary")["totals"] for r in (one, two, other)]
    assert totals[0]["allocated_bytes"] == totals[1]["allocated_bytes"]
    assert totals[0]["allocated_bytes"] != totals[2]["allocated_bytes"]


@pytest.mark.parametrize("rate, value", [("65536", 65536), ("64k", 64 << 10), ("1MiB", 1 << 20),
                                         ("2g", 2 << 30), ("1T", 1 << 40)])
def test_a_rate_takes_every_unit_the_help_names(tmp_path, rate, value):
    """K, M, G and T in either case, or KiB..TiB, are powers of 1024; 1T is the largest rate."""
    r = record(tmp_path, "known_peak", "--sample-rate", rate)
    assert r.analyze("summary")["capture"]["sample_rate"] == value


@pytest.mark.parametrize("rate", ["0", "abc", "12Q", "-5", "2T", "1KB", "1kiB", "1Ki"])
def test_a_bad_rate_is_refused_with_one_line(tmp_path, rate):
    out = memlens("run", "-o", tmp_path / "x.mlens", "--sample-rate", rate, "--",
                  PROGRAMS / "known_peak")
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "--sample-rate" in out.stderr
    assert not (tmp_path / "x.mlens").exists()


def test_the_agent_refuses_a_bad_rate_in_the_environment(tmp_path):
    capture = tmp_path / "x.mlens"
    env = dict(os.environ, LD_PRELOAD=str(BUILD / "lib" / "libmemlens.so"),
               MEMLENS_OUTPUT=str(capture), MEMLENS_SAMPLE_RATE="lots")
    env.pop("MEMLENS_TRACKED", None)
    proc = subprocess.run([str(PROGRAMS / "known_peak")], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0  # the program runs on, unrecorded
    assert "MEMLENS_SAMPLE_RATE='lots'" in proc.stderr and "not recording" in proc.stderr
    assert not capture.exists()


@pytest.mark.skipif(not HOOKS, reason="memlens was built without Python headers")
def test_python_program_sampled_through_python_m_memlens(tmp_path, python):
    """A million ints, a bytearray and 20,000 bytes of 2,000, recorded by `python3 -m memlens
    run --sample`: at their Python lines, the estimates for the ints (~40 MB of small objects)
    and the bytes (~41 MB of blocks that pymalloc passes on to the raw domain) land within three
    standard errors (3 sqrt(rate/bytes), docs/sampling.md) of the exact figure of a full
    recording, and the 32 MiB buffer, 1000 times the rate, is certain to be sampled and weighs
    its size (the few small objects made at its line are rarely sampled: the rest of the
    difference). Bytes counted down twice, by the object domain's wrapper and again by the raw
    domain's under it, would make the blocks of 2,000 nearly twice as likely to be sampled."""
    script = SCRIPTS / "sampled.py"
    # PYTHONHASHSEED: the interpreter's own allocations, and so the samples, the same each run.
    env = dict(os.environ, MEMLENS_SAMPLE_SEED=SEED, PYTHONPATH=str(REPO / "src" / "python"),
               MEMLENS_BUILD_DIR=str(BUILD), PYTHONHASHSEED="0")
    captures = {}
    for mode, options in (("sampled", ["--sample"]), ("full", [])):
        captures[mode] = tmp_path / f"{mode}.mlens"
        proc = subprocess.run([python, "-m", "memlens", "run", "-o", str(captures[mode]), *options,
                               str(script)], capture_output=True, text=True, timeout=300, env=env,
                              cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "kept 1000000 ints\n"
    rows = {}
    for mode, capture in captures.items():
        r = Recorded(None, capture)
        assert r.analyze("summary")["capture"]["estimates"] is (mode == "sampled")
        top = r.analyze("top", "--by", "line", "--limit", "100000")["rows"]
        rows[mode] = {}
        for row in top:  # a line may be the site of several functions (<module>, <listcomp>)
            if row["site"]["file"].endswith("/sampled.py"):
                line = rows[mode].setdefault(row["site"]["line"], {"allocated_bytes": 0,
                                                                   "peak_bytes": 0})
                for key in line:
                    line[key] += row[key]
    for marker, big in (("ints", 0), ("buffer", 32 * MiB), ("medium", 0)):
        line = [n for n, text in enumerate(script.read_text().splitlines(), 1)
                if f"# @{marker}" in text][0]
        exact, estimate = rows["full"][line], rows["sampled"][line]
        assert exact["peak_bytes"] > 20 * MiB  # everything is freed at exit: compare the peak
        for key in ("allocated_bytes", "peak_bytes"):
            if big:  # the block, plus the line's few hundred bytes of objects
                assert 0 <= exact[key] - big < 1024, (marker, key, exact[key])
                assert abs(estimate[key] - exact[key]) < 2 * DEFAULT_RATE, (marker, key)
            else:
                tolerance = 3 * (DEFAULT_RATE / exact[key]) ** 0.5
                assert close(estimate[key], exact[key], tolerance), (marker, key, estimate[key],
                                                                      exact[key])


def sampled_realloc_chains(tmp_path, env_extra=None):
    """realloc_chain recorded under 12 seeds at one byte in 64; checks every capture and returns
    the processes' stderr."""
    live = {"grow": 4096, "survivor": 50}
    first_sampled, stderr = [], []
    for seed in range(1, 13):
        r = record(tmp_path, "realloc_chain", "--sample-rate", "64", seed=str(seed),
                   name=f"seed{seed}", env_extra=env_extra)
        stderr.append(r.proc.stderr)
        rows = {marker: r.rows_at("realloc_chain.c", marker)
                for marker in ("first", "grow", "realloc_null", "survivor")}
        for marker, found in rows.items():
            leaked = sum(row["leaked_bytes"] for row in found)
            if marker not in live:
                assert leaked == 0, (seed, marker, found)
            elif leaked:  # sampled: its estimate is its size over its sampling probability
                assert close(leaked, live[marker] / (1 - math.exp(-live[marker] / 64)), 0.01), \
                    (seed, marker, leaked)
        assert sum(row["leaked_bytes"] for row in rows["grow"]) > 0, seed  # p(4096) = 1 - e^-64
        first_sampled.append(bool(rows["first"]))
    assert any(first_sampled) and not all(first_sampled), first_sampled
    return stderr


def test_a_realloc_chain_sampled_leaves_only_its_live_blocks(tmp_path):
    """realloc_chain grows one block from 16 to 4096 bytes, frees another with realloc(q, 0)
    and keeps a third through a failed realloc. Whichever links of the chain are sampled (12
    seeds at one byte in 64: from 22% of the 16-byte block to all of the 4096-byte one), a
    realloc of a sampled block records its release and one of an unsampled block records
    nothing, so only the two blocks live at exit are leaked, each weighted by its own size."""
    sampled_realloc_chains(tmp_path)


def test_sampling_in_front_of_another_allocator(tmp_path):
    """With an allocator other than the C library's behind the agent (preloaded after it, as a
    program's jemalloc would be), the interposers cannot jump straight to the C library: every
    call takes the guarded full path into that allocator. The sampled figures must be the same
    as with glibc's, the allocator must have served the program, and the chunks it maps for
    itself, in sampled and unsampled calls alike, are not the program's mappings: under the
    guard they are not recorded (unguarded, realloc_chain's would show some 70 KiB)."""
    bump = PROGRAMS / "libbump_alloc.so"
    stderr = sampled_realloc_chains(tmp_path, env_extra={"LD_PRELOAD": str(bump)})
    for text in stderr:
        served = [int(n) for n in re.findall(r"bump_alloc: (\d+) blocks", text)]
        assert served and served[0] > 0, text  # the first line is the recorded program's
    for capture in tmp_path.glob("seed*.mlens"):
        totals = Recorded(None, capture).analyze("summary")["totals"]
        assert totals["mappings"]["in_use_bytes"] == 0, capture.name
