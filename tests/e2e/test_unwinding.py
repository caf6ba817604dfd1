"""Stacks are exact: through libc and libstdc++ frames (built without frame pointers), a signal
handler, a thread, 10,000 levels of recursion, and the cases where reusing the previous stack's
outer frames would go wrong. Source: tests/programs/unwind_paths.cc."""
import re
import subprocess

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, line_of

SOURCE = "unwind_paths.cc"


def ours(stack):
    """(function, marker line) of the frames in the test program, innermost first."""
    return [(re.sub(r"(?<!operator)\(.*\)$", "", f["function"]), f["line"]) for f in stack
            if f["file"].endswith("/" + SOURCE) and not f["inlined"]]


def at(marker):
    return line_of(SOURCE, marker)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The program's run, once for all tests here: (Recorded, qsort calls, sort calls, leaks)."""
    tmp = tmp_path_factory.mktemp("unwind")
    capture = tmp / "unwind_paths.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--",
                           str(PROGRAMS / "unwind_paths")], capture_output=True, text=True,
                          timeout=120, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    counts = re.fullmatch(r"qsort=(\d+) sort=(\d+)\nok\n", proc.stdout)
    assert counts, proc.stdout
    r = Recorded(proc, capture)
    leaks = r.analyze("leaks", "--limit", "1000")["leaks"]
    return r, int(counts[1]), int(counts[2]), leaks


def leak_from(leaks, marker):
    """The leaks whose innermost frame in the test program is the marked line."""
    found = [l for l in leaks if ours(l["stack"]) and ours(l["stack"])[0][1] == at(marker)]
    assert found, f"no leak from @{marker}"
    return found


def ends_at_start(stack):
    return stack[-1]["function"] == "_start"


def test_qsort_comparator_stack_runs_through_libc(run):
    r, qsort_calls, _, leaks = run
    row = r.row_at(SOURCE, "qsort_cmp")
    assert row["allocations"] == qsort_calls > 0
    assert row["allocated_bytes"] == 24 * qsort_calls and row["leaked_bytes"] == 24
    (leak,) = leak_from(leaks, "qsort_cmp")
    assert ours(leak["stack"]) == [("CompareAllocating", at("qsort_cmp")),
                                   ("SortWithQsort", at("qsort_call")), ("main", at("main_qsort"))]
    libc = [f for f in leak["stack"] if "libc.so" in f["module"]]
    assert any(f["function"] == "msort_with_tmp" for f in libc), leak["stack"]
    assert ends_at_start(leak["stack"])


def test_std_sort_comparator_and_std_function(run):
    r, _, sort_calls, leaks = run
    row = r.row_at(SOURCE, "sort_cmp")
    assert row["allocations"] == sort_calls > 0
    assert row["allocated_bytes"] == 40 * sort_calls and row["leaked_bytes"] == 40
    (leak,) = leak_from(leaks, "sort_cmp")
    names = ours(leak["stack"])
    assert names[0] == ("operator()", at("sort_cmp"))
    assert names[-2:] == [("SortWithStdSort", at("sort_call")), ("main", at("main_sort"))]
    assert ends_at_start(leak["stack"])
    (leak,) = leak_from(leaks, "function_body")
    assert ours(leak["stack"])[-2:] == [("CallThroughFunction", at("function_call")),
                                        ("main", at("main_function"))]
    assert leak["bytes"] == 333 and ends_at_start(leak["stack"])


def test_allocation_inside_libstdcxx(run):
    r, _, _, leaks = run
    grown = [l for l in leaks if l["bytes"] == 5001]
    assert len(grown) == 1
    stack = grown[0]["stack"]
    assert ours(stack)[-2:] == [("GrowString", at("string_reserve")), ("main", at("main_string"))]
    assert ends_at_start(stack)


def test_signal_handler_and_thread(run):
    r, _, _, leaks = run
    (leak,) = leak_from(leaks, "in_handler")
    assert leak["bytes"] == 77
    assert ours(leak["stack"]) == [("OnSignal", at("in_handler")), ("RaiseSignal", at("raise")),
                                   ("main", at("main_raise"))]
    assert ends_at_start(leak["stack"])
    (leak,) = leak_from(leaks, "in_thread")
    assert leak["bytes"] == 4444
    assert ours(leak["stack"]) == [("ThreadBody", at("in_thread"))]
    assert leak["stack"][1]["function"] == "start_thread"


def test_ten_thousand_levels_reach_main(run):
    r, _, _, leaks = run
    level = r.row_at(SOURCE, "recurse_alloc")
    assert (level["allocations"], level["allocated_bytes"], level["leaked_bytes"]) == \
        (10001, 16 * 10001, 0)
    (leak,) = leak_from(leaks, "recurse_bottom")
    assert leak["bytes"] == 1000
    expected = ([("Recurse", at("recurse_bottom"))] + [("Recurse", at("recurse_call"))] * 10000
                + [("main", at("main_recurse"))])
    assert ours(leak["stack"]) == expected
    assert ends_at_start(leak["stack"])


def test_same_frames_from_two_call_sites_are_told_apart(run):
    r, _, _, leaks = run
    twins = {ours(l["stack"])[-1]: (l["blocks"], l["bytes"]) for l in leaks
             if l["stack"][0]["line"] == at("twin_leaf")}
    assert twins == {("main", at("twin_first")): (4, 400), ("main", at("twin_second")): (4, 400),
                     ("main", at("main_catch")): (1, 61)}
    (after,) = [l for l in leaks if l["bytes"] == 61]
    assert ours(after["stack"]) == [("Leaf", at("twin_leaf")), ("Twin", at("twin")),
                                    ("CatchAndAllocate", at("after_catch")),
                                    ("main", at("main_catch"))]


def test_exception_between_allocations_and_returned_deep_chains(run):
    r, _, _, leaks = run
    thrower = r.row_at(SOURCE, "thrower_alloc")
    assert (thrower["allocations"], thrower["allocated_bytes"], thrower["leaked_bytes"]) == \
        (4, 200, 0)
    for marker, size, main_line in (("deep_a", 71, "main_deep_a"), ("deep_b", 72, "main_deep_b")):
        (leak,) = [l for l in leaks if l["bytes"] == 3 * size]
        name = "DeepA" if marker == "deep_a" else "DeepB"
        assert ours(leak["stack"]) == [(name, at(marker))] * 21 + [("main", at(main_line))]


def test_threads_sharing_the_rule_table_unwind_every_call_site_exactly(record):
    """6,144 call sites, more than a thread's rule cache holds, walked by 4 threads at once:
    each leaked stack is exactly Leaf <- Walk at its line <- Worker <- start_thread, 4 blocks
    of 32 bytes per call site, 1,024 call sites per @walk_K line
    (tests/programs/many_call_sites.c)."""
    source = "many_call_sites.c"
    r = record("many_call_sites", timeout=120)
    assert r.proc.returncode == 0 and r.proc.stdout == "ok\n", r.proc.stderr
    report = r.analyze("leaks", "--limit", "100000")
    walk_lines = {line_of(source, f"walk_{k}"): k for k in range(6)}
    per_line = dict.fromkeys(walk_lines.values(), 0)
    for leak in report["leaks"]:
        frames = [(re.sub(r"\(.*\)$", "", f["function"]), f["line"]) for f in leak["stack"]
                  if f["file"].endswith("/" + source)]
        if [f for f, _ in frames] in ([], ["main"]):
            continue  # the C runtime's own blocks, and stdout's buffer from main's printf
        assert [f for f, _ in frames] == ["Leaf", "Walk", "Worker"], leak["stack"]
        assert frames[0][1] == line_of(source, "leaf") and frames[2][1] == line_of(source, "worker")
        assert frames[1][1] in walk_lines, leak["stack"]
        assert leak["stack"][3]["function"] == "start_thread", leak["stack"]
        assert (leak["blocks"], leak["bytes"]) == (4, 128), leak
        per_line[walk_lines[frames[1][1]]] += 1
    assert per_line == dict.fromkeys(range(6), 1024)
    row = r.row_at(source, "leaf")
    assert (row["allocations"], row["allocated_bytes"], row["leaked_bytes"]) == \
        (6144 * 8 * 4, 6144 * 8 * 4 * 32, 6144 * 4 * 32)
