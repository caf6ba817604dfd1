"""Blocks the C/C++ runtime keeps for the life of the process (libstdc++'s exception emergency
pool, stdout's stdio buffer) are shown apart, as the runtime's, and never as the program's leaks
(docs/runtime-allocations.md)."""
import json
import re

from conftest import line_of, memlens


def test_leaks_lists_the_programs_leak_and_the_runtimes_blocks_apart(record):
    run = record("runtime_noise")
    assert run.proc.returncode == 0, run.proc.stderr
    buffer = int(re.search(r"stdout buffer (\d+)", run.proc.stdout).group(1))

    leaks = run.analyze("leaks")
    assert [(l["bytes"], l["blocks"], l["site"]["file"].rsplit("/", 1)[-1], l["site"]["line"])
            for l in leaks["leaks"]] == [(1000, 1, "runtime_noise.cc", line_of("runtime_noise.cc", "leak"))]
    assert (leaks["leaked_bytes"], leaks["leaked_blocks"], leaks["stack_count"]) == (1000, 1, 1)

    runtime = leaks["runtime"]
    rules = {r["rule"]: (r["bytes"], r["blocks"], r["stacks"]) for r in runtime["rules"]}
    assert sorted(rules) == ["libstdc++-init", "stdio-buffers"]
    assert rules["stdio-buffers"] == (buffer, 1, 1)
    pool, pool_blocks, _ = rules["libstdc++-init"]
    assert pool_blocks == 1
    # Every byte in use at exit is either the program's leak or the runtime's: the memory map,
    # which counts the live set without classing it, holds exactly both.
    heap = memlens("map", run.capture, "--json")
    assert heap.returncode == 0, heap.stderr
    assert json.loads(heap.stdout)["in_use_bytes"] == 1000 + buffer + pool
    assert (runtime["bytes"], runtime["blocks"], runtime["stacks"]) == (buffer + pool, 2, 2)

    # summary: the program's figure at exit, the runtime's on its own line, and in JSON.
    summary = run.analyze("summary")
    totals = summary["totals"]
    assert (totals["in_use_at_exit_bytes"], totals["in_use_at_exit_blocks"]) == (1000, 1)
    assert summary["runtime"] == runtime
    assert [(r["site"]["line"], r["leaked_bytes"]) for r in summary["top_in_use_at_exit"]] == \
        [(line_of("runtime_noise.cc", "leak"), 1000)]
    text = memlens("summary", run.capture)
    assert text.returncode == 0, text.stderr
    assert re.search(r"at exit +1000 B in 1 block still allocated at exit\n", text.stdout)
    kept = f"{(buffer + pool) / 1024:.2f} KiB in 2 blocks kept by the C/C++ runtime"
    assert re.search(r"runtime +" + re.escape(kept) + r" for the life of the process \(not leaks\)",
                     text.stdout), text.stdout
    text = memlens("leaks", run.capture)
    assert text.stdout.startswith("In use at exit: 1000 B in 1 block, from 1 call stack\n"
                                  f"Runtime: {kept}"), text.stdout
