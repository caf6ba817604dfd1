"""The analysis views beyond summary/top/tree/leaks, on programs whose numbers are known
exactly: histogram, temporary, map, leaks --suppressions / --growth, and the filters
(--include, --exclude, --thread) every view shares."""
from conftest import line_of, memlens


def at_line(rows, source, marker):
    line = line_of(source, marker)
    return [r for r in rows if r["site"]["file"].endswith("/" + source) and r["site"]["line"] == line]


def buckets(entry):
    return {b["bucket"]: (b["count"], b["bytes"]) for b in entry["buckets"]}


# --- histogram --------------------------------------------------------------------------------

def test_histogram_buckets_per_site_and_overall(record):
    run = record("sizes")
    assert run.proc.returncode == 0, run.proc.stderr
    out = run.analyze("histogram", "--sites", "3")
    sites = out["sites"]
    assert [s["site"]["line"] for s in sites] == [line_of("sizes.c", m) for m in ("large", "medium", "small")]
    assert buckets(sites[0]) == {16: (50, 50 * 70000)}
    assert buckets(sites[1]) == {9: (200, 200 * 1000)}
    assert buckets(sites[2]) == {4: (300, 300 * 24)}
    b = {x["bucket"]: x for x in out["buckets"]}
    assert (b[4]["min_size"], b[4]["max_size"]) == (16, 31)
    overall = buckets(out)
    for bucket, (count, size) in [(16, (50, 3500000)), (9, (200, 200000)), (4, (300, 7200))]:
        assert overall[bucket][0] >= count and overall[bucket][1] >= size
    assert sum(c for c, _ in overall.values()) == out["allocations"]
    text = memlens("histogram", run.capture, "--sites", "1")
    assert text.returncode == 0, text.stderr
    assert "64.00 KiB - 128.00 KiB" in text.stdout and "#" in text.stdout


# --- temporary --------------------------------------------------------------------------------

def test_temporary_counts_malloc_free_pairs(record):
    run = record("temporaries")
    assert run.proc.returncode == 0, run.proc.stderr
    out = run.analyze("temporary")
    [scratch] = at_line(out["sites"], "temporaries.c", "scratch")
    assert (scratch["temporary"], scratch["allocations"], scratch["temporary_bytes"]) == (1000, 1000, 64000)
    assert scratch["temporary_share"] == 1.0
    assert at_line(out["sites"], "temporaries.c", "kept") == []
    assert out["temporary"] >= 1000


# --- map --------------------------------------------------------------------------------------

def test_map_finds_the_hole_in_a_mapping(record):
    run = record("address_hole")
    assert run.proc.returncode == 0, run.proc.stderr
    base = int(run.proc.stdout.split()[0])
    out = run.analyze("map")
    [region] = [r for r in out["regions"] if r["begin"] == base]
    assert region["kind"] == "mapping"
    assert region["end"] - region["begin"] == region["span_bytes"] == 8 << 20
    assert region["in_use_bytes"] == (8 << 20) - (512 << 10)
    assert region["blocks"] == 2
    assert region["largest_gap"] == 512 << 10
    assert region["top_site"]["line"] == line_of("address_hole.c", "map")
    assert out["largest_gap"] >= 512 << 10
    assert out["in_use_bytes"] == sum(r["in_use_bytes"] for r in out["regions"])
    assert out["span_bytes"] == sum(r["span_bytes"] for r in out["regions"])


# --- leaks: suppressions and growth -----------------------------------------------------------

def test_leaks_suppressions_hide_and_count(record, tmp_path):
    run = record("leak_two_paths")
    supp = tmp_path / "supp.txt"
    supp.write_text("# the second path is known\n\n  function:path_b  \n")
    out = run.analyze("leaks", "--suppressions", str(supp))
    assert out["suppressed"] == {"stacks": 1, "bytes": 500, "blocks": 5}
    funcs = [[f["function"] for f in leak["stack"]] for leak in out["leaks"]]
    assert not any("path_b" in f for f in funcs)
    assert any("path_a" in f for f in funcs)
    supp.write_text("function:make_*\n")  # both paths
    out = run.analyze("leaks", "--suppressions", str(supp))
    assert out["suppressed"] == {"stacks": 2, "bytes": 800, "blocks": 8}
    supp.write_text("file:leak_two_*.c\n")  # every stack passes through main in that file
    out = run.analyze("leaks", "--suppressions", str(supp))
    assert out["stack_count"] == 0 and out["leaks"] == []
    assert out["suppressed"]["bytes"] == out["leaked_bytes"]
    bad = memlens("leaks", run.capture, "--suppressions", str(tmp_path / "missing"))
    assert bad.returncode == 2 and "missing" in bad.stderr


def test_leaks_text_counts_in_words(record):
    """The terminal view says "1 block", never "1 blocks": leak_two_paths leaves 5 blocks from
    path_b and 3 from path_a, and main's stdout buffer (one block, the runtime's)."""
    run = record("leak_two_paths")
    out = memlens("leaks", run.capture)
    assert out.returncode == 0, out.stderr
    assert "in 8 blocks, from 2 call stacks" in out.stdout
    assert "in 1 block kept by the C/C++ runtime" in out.stdout
    assert "500 B in 5 blocks (5 allocated here in all)" in out.stdout
    assert "300 B in 3 blocks (3 allocated here in all)" in out.stdout
    assert " 1 blocks" not in out.stdout
    summary = memlens("summary", run.capture).stdout
    assert "in 10 allocations (1 free)" in summary


def test_leaks_growth_finds_a_list_freed_at_exit(record):
    run = record("grows")
    assert run.proc.returncode == 0, run.proc.stderr
    plain = run.analyze("leaks")
    assert at_line([{"site": l["stack"][0], **l} for l in plain["leaks"]], "grows.c", "grow") == []
    out = run.analyze("leaks", "--growth")
    assert len(out["checkpoints"]) == 8
    [site] = at_line(out["growing"], "grows.c", "grow")
    assert site["in_use_at_end"] == 0
    assert site["growth_bytes"] == site["bytes"][-1] - site["bytes"][0] > 0
    assert site["bytes"] == sorted(site["bytes"])
    assert all(b % 64 == 0 for b in site["bytes"])
    assert [f["function"] for f in site["stack"]][:2] == ["grow_list", "main"]
    assert out["site_count"] == 1


def test_leaks_growth_reports_nothing_in_a_steady_state(record):
    run = record("steady")
    assert run.proc.returncode == 0, run.proc.stderr
    out = run.analyze("leaks", "--growth")
    assert len(out["checkpoints"]) == 8
    assert out["growing"] == [] and out["site_count"] == 0
    assert run.analyze("leaks", "--growth", "--windows", "4")["growing"] == []


# --- filters ----------------------------------------------------------------------------------

def leaked_at(out, source, marker):
    return sum(r["leaked_bytes"] for r in at_line(out["rows"], source, marker))


def test_include_keeps_one_call_path_exclude_removes_it(record):
    run = record("leak_two_paths")
    top = run.analyze("top", "--by", "line", "--include", "function:path_a")
    assert leaked_at(top, "leak_two_paths.c", "make_block") == 300
    top = run.analyze("top", "--by", "line", "--exclude", "path_a")
    assert leaked_at(top, "leak_two_paths.c", "make_block") == 500
    top = run.analyze("top", "--by", "line", "--include", "file:leak_two_paths.c",
                      "--exclude", "function:path_*")
    assert leaked_at(top, "leak_two_paths.c", "make_block") == 0
    leaks = run.analyze("leaks", "--include", "path_a")
    assert leaks["leaked_bytes"] == 300 and leaks["leaked_blocks"] == 3
    totals = run.analyze("summary", "--include", "function:path_*")["totals"]
    assert (totals["in_use_at_exit_bytes"], totals["in_use_at_exit_blocks"], totals["allocations"]) == (800, 8, 8)
    assert memlens("summary", run.capture, "--include", "function:").returncode == 2
    tree = run.analyze("tree", "--metric", "leaked", "--include", "function:path_b")
    assert tree["root"]["total"] == 500


def test_filters_apply_to_histogram_temporary_and_diff(record):
    run = record("leak_two_paths")
    hist = run.analyze("histogram", "--include", "function:path_b")
    assert buckets(hist) == {6: (5, 500)}
    temp = run.analyze("temporary", "--include", "function:path_a")
    assert temp["temporary"] == 0
    out = memlens("diff", f"{run.capture}@t=0s", run.capture, "--json", "--include", "function:path_a")
    assert out.returncode == 0, out.stderr


def test_thread_keeps_the_allocations_of_one_thread(record):
    run = record("two_threads")
    assert run.proc.returncode == 0, run.proc.stderr
    worker = run.proc.stdout.split()[0]
    top = run.analyze("top", "--thread", worker)
    assert leaked_at(top, "two_threads.c", "worker") == 21000
    assert at_line(top["rows"], "two_threads.c", "main") == []
    pid = run.analyze("summary")["process"]["pid"]
    top = run.analyze("top", "--thread", str(pid))
    assert leaked_at(top, "two_threads.c", "main") == 10000
    assert at_line(top["rows"], "two_threads.c", "worker") == []
    leaks = run.analyze("leaks", "--thread", worker)
    assert leaks["leaked_bytes"] == 21000
