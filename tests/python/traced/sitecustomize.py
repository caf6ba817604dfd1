"""Put on PYTHONPATH with MEMLENS_TRACED_OUT=FILE, this makes any Python program of the tests run
under tracemalloc, without memlens: when the program leaves through os._exit (as the test scripts
do, so that "in use at exit" is what the program held), it writes to FILE, as JSON, what
tracemalloc counts in use at each line, [[file, line, bytes, blocks], ...] by the innermost
frame. The reference the Python tests hold memlens to where a figure depends on the interpreter;
the program itself runs as it would (`python script.py`, `python -m package`)."""
import json
import os
import tracemalloc

_out = os.environ.pop("MEMLENS_TRACED_OUT", None)
if _out:
    _leave = os._exit

    def _report_then_exit(status):
        stats = tracemalloc.take_snapshot().statistics("lineno")
        with open(_out, "w") as f:
            json.dump([[s.traceback[0].filename, s.traceback[0].lineno, s.size, s.count]
                       for s in stats], f)
        _leave(status)

    os._exit = _report_then_exit
    tracemalloc.start()
