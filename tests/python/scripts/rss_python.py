"""A million small objects filled and freed, for `memlens rss`'s python_free part: the free space
inside pymalloc's arenas (tests/e2e/test_rss.py).

    filled      1,000,000 object() instances (16 bytes each with the GIL: a size pymalloc does
                not round, so "bytes in allocated blocks" is the bytes asked for) in one list
                (8 MB of pointers: a large block, from malloc, not from pymalloc)
    half_freed  every other one freed: no pool empties, so every arena stays, half of it free
    freed       every one freed: pymalloc gives back each arena left empty

At each phase, once its work is done: one JSON line on stdout with sys.getallocatedblocks() and
what sys._debugmallocstats() says (it writes to the C stderr, so fd 2 goes to a file meanwhile):
{"phase", "allocated_blocks", "allocator": "pymalloc", "arenas", "arena_bytes" (arenas x arena
size), "allocated_bytes", "available_bytes", "unused_pool_bytes", "pool_header_bytes",
"quantization_bytes", "alignment_bytes", "free_bytes" (arena_bytes - allocated_bytes)}; or
"allocator": "hidden" and no figures when it says nothing of pymalloc: under memlens's
allocator wrappers (it reports pymalloc only while the object allocator is pymalloc's own
functions) and in a free-threaded build (mimalloc, whose statistics are not collected). Then
~350 ms asleep (the agent reads the mappings at most every 100 ms) and the marker named after
the phase (memlens.marker: a no-op when the memlens package or the agent is absent).
The test takes the figures from a run on its own and the view from a run under memlens (which
prints ~2,900 more allocated blocks, the memlens package's binding to the agent); it checks:
python_free's virtual_bytes, and the pymalloc arenas' free_bytes summed, within 2% of
free_bytes (allowing for those blocks), and their growth from filled to half_freed within 2%
of free_bytes' (the 500,000 objects freed, 8,000,000 bytes).
"""
import json
import os
import re
import sys
import tempfile
import time

try:
    import memlens
except ImportError:  # run on its own, without the package on the path
    memlens = None

COUNT = 1_000_000

FIGURES = {  # the first occurrence of each (the arena map's own lines come after these)
    "arenas": r"# arenas allocated current\s*=\s*([\d,]+)",
    "arena_bytes": r"\d+ arenas \* \d+ bytes/arena\s*=\s*([\d,]+)",
    "allocated_bytes": r"# bytes in allocated blocks\s*=\s*([\d,]+)",
    "available_bytes": r"# bytes in available blocks\s*=\s*([\d,]+)",
    "unused_pool_bytes": r"\d+ unused pools \* \d+ bytes\s*=\s*([\d,]+)",
    "pool_header_bytes": r"# bytes lost to pool headers\s*=\s*([\d,]+)",
    "quantization_bytes": r"# bytes lost to quantization\s*=\s*([\d,]+)",
    "alignment_bytes": r"# bytes lost to arena alignment\s*=\s*([\d,]+)",
}


def debug_malloc_stats():
    """What sys._debugmallocstats() writes on the C stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        return out.read()


def phase(name):
    text = debug_malloc_stats()
    figures = {"phase": name, "allocated_blocks": sys.getallocatedblocks(), "allocator": "hidden"}
    if text.startswith("Small block threshold = 512"):  # pymalloc's report
        figures["allocator"] = "pymalloc"
        for key, pattern in FIGURES.items():
            figures[key] = int(re.search(pattern, text).group(1).replace(",", ""))
        figures["free_bytes"] = figures["arena_bytes"] - figures["allocated_bytes"]
    print(json.dumps(figures), flush=True)
    del text, figures
    time.sleep(0.35)
    if memlens:
        memlens.marker(name)


def main():
    objects = [object() for _ in range(COUNT)]  # @objects
    phase("filled")
    for i in range(0, COUNT, 2):
        objects[i] = None
    phase("half_freed")
    for i in range(1, COUNT, 2):
        objects[i] = None
    phase("freed")


if __name__ == "__main__":
    main()
