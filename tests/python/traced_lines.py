"""python traced_lines.py OUT SCRIPT MARKER...: runs SCRIPT (which ends with os._exit) under
tracemalloc, without memlens, and writes to OUT, as JSON, what tracemalloc counts in use at
each `# @MARKER` line of SCRIPT when it exits: {marker: [bytes, blocks]}. The reference the
Python tests hold memlens to where a figure depends on the interpreter (a free-threaded build's
list keeps a header before its items, and frees a replaced array only later)."""
import json
import os
import runpy
import sys
import tracemalloc

out, script, markers = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3:]
source = open(script, encoding="utf-8").read().splitlines()
lines = {m: next(n for n, text in enumerate(source, 1) if text.endswith("# @" + m))
         for m in markers}
leave = os._exit


def report_then_exit(status):
    stats = tracemalloc.take_snapshot().statistics("lineno")
    found = {}
    for marker, line in lines.items():
        at = [s for s in stats
              if s.traceback[0].filename == script and s.traceback[0].lineno == line]
        found[marker] = [sum(s.size for s in at), sum(s.count for s in at)]
    with open(out, "w") as f:
        json.dump(found, f)
    leave(status)


os._exit = report_then_exit
sys.argv = [script]
sys.path[0] = os.path.dirname(script)
tracemalloc.start()
runpy.run_path(script, run_name="__main__")
