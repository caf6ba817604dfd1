"""memlens.tracemalloc: the standard library's tracemalloc API, answered by memlens, with native
memory in the same traces.

    import memlens.tracemalloc as tracemalloc
    tracemalloc.start(25)
    ...
    snapshot = tracemalloc.take_snapshot()
    for stat in snapshot.statistics("lineno")[:10]:
        print(stat)
    python_only = snapshot.filter_traces([tracemalloc.DomainFilter(False, tracemalloc.NATIVE_DOMAIN)])

The names and results are the standard library's (3.11+): the pure-Python classes (Snapshot,
Statistic, Filter, DomainFilter, Traceback, Frame...) are the standard module's own, imported,
so snapshots pickle and compare across both. What differs (docs/tracemalloc.md):
- Blocks of the malloc family (C/C++ code: extension modules, libraries) are traced too, in
  the domain NATIVE_DOMAIN, and the program's own anonymous mappings in MAPPING_DOMAIN, each
  with the Python lines that made them; Python's allocator is domain 0, as in the stdlib.
- The traces are a memlens span (memlens.Tracker) written to a private temporary file, removed
  at stop() and at exit; every question flushes the span and asks the analyzer (`memlens
  blocks`), so a call costs a replay of the span so far, not a table lookup (docs: what a call
  costs). The module's own work is left out of the figures (its frames are filtered out).
- The traceback limit applies when a question is asked, not at allocation: memlens records up
  to 512 Python frames (so total_nframe is the real depth, up to 512).
"""
import atexit
import linecache  # noqa: F401 (the stdlib module has it; its users patch tracemalloc.linecache)
import os
import shutil
import sys
import tempfile
import threading

import tracemalloc as _stdlib  # the standard module: its classes are ours

from memlens import _cli

# The standard library's pure-Python part, re-exported (the same objects, not copies).
from tracemalloc import (BaseFilter, DomainFilter, Filter, Frame, Snapshot, Statistic,
                         StatisticDiff, Trace, Traceback, _compare_grouped_stats, _format_size,
                         _normalize_filename, _Traces)

__all__ = ["start", "stop", "is_tracing", "clear_traces", "get_traceback_limit",
           "get_traced_memory", "reset_peak", "get_tracemalloc_memory", "get_object_traceback",
           "take_snapshot", "BaseFilter", "DomainFilter", "Filter", "Frame", "Snapshot",
           "Statistic", "StatisticDiff", "Trace", "Traceback", "PYTHON_DOMAIN", "NATIVE_DOMAIN",
           "MAPPING_DOMAIN"]

# Trace domains (tracemalloc's domains are unsigned ints; 0 is Python's allocator, and C
# extensions pick their own for PyTraceMalloc_Track: numpy's is 389047). Ours spell "ML" + n.
PYTHON_DOMAIN = 0
NATIVE_DOMAIN = 0x4D4C0001   # malloc, calloc, realloc, C++ new...: C and C++ code
MAPPING_DOMAIN = 0x4D4C0002  # the program's own anonymous mmap()s (the accessible part)
_DOMAINS = {"python": PYTHON_DOMAIN, "native": NATIVE_DOMAIN, "mapping": MAPPING_DOMAIN}

# The stdlib's bound on start(nframe): frames are counted in 16 bits in its traces.
_MAX_NFRAME = 65535
_UNKNOWN = (("<unknown>", 0),)  # the stdlib's traceback for an allocation without Python frames

_lock = threading.RLock()
_tracker = None      # the memlens.Tracker of the current span, None when not tracing
_nframe = 1          # the traceback limit
_directory = None    # the private directory of the span captures
_spans = 0
_peak_from = 0       # reset_peak: the peak counts from this event of the span (0: its start)


# This file, as its code objects name it: every stack with a frame in it is the module's own
# work (the analyzer's answers read, the tracebacks built), not the program's memory, and is
# left out of every figure, the peak included (worked out from the stacks' Python frames, so
# no native frame is symbolized: an --exclude pattern would cost 0.2 s a call).
_OWN_FILE = __spec__.origin if __spec__ and __spec__.origin else __file__
_OWN_ARGS = ("--leave-out-python-file", _OWN_FILE)


def _remove_directory():
    global _directory
    if _directory:
        shutil.rmtree(_directory, ignore_errors=True)
        _directory = None


def _start_span():
    """A new span, into a new private capture file."""
    global _tracker, _directory, _spans, _peak_from
    from memlens.tracker import Tracker  # noqa: PLC0415 (the module imports without it)
    if _directory is None:
        _directory = tempfile.mkdtemp(prefix="memlens-tracemalloc-")
    _spans += 1
    path = os.path.join(_directory, f"span-{_spans}.mlens")
    tracker = Tracker(path, native=True, sample_rate=0)
    tracker.start()  # RuntimeError with the agent's reason when it cannot
    _tracker = tracker
    _peak_from = 0


def _stop_span():
    global _tracker
    tracker, _tracker = _tracker, None
    if tracker is None:
        return
    path = tracker.stop()
    for leftover in (path, path + ".index"):
        try:
            os.unlink(leftover)
        except FileNotFoundError:
            pass


def _stop_at_exit():
    with _lock:
        _stop_span()
        _remove_directory()


atexit.register(_stop_at_exit)


def _trace_the_child():
    """After fork(), in the child: the parent's span is not the child's (memlens records a span
    in the process that started it), so a traced child starts a span of its own. Its traces
    begin at the fork: the blocks it inherited are not in them."""
    global _tracker, _lock, _directory
    _lock = threading.RLock()  # another thread may have held it at the fork
    _directory = None  # the parent's: removed by the parent, never by the child's exit
    if _tracker is not None:
        _tracker = None
        try:
            _start_span()
        except RuntimeError:
            pass  # not tracing in the child, as is_tracing() then says


os.register_at_fork(after_in_child=_trace_the_child)


def _ask(*options):
    """`memlens blocks SPAN --json OPTIONS`, on everything recorded up to now."""
    _tracker.flush()
    return _cli.json_output("blocks", _tracker.path, *_OWN_ARGS, *options)


def start(nframe=1):
    """Starts tracing (a memlens span), keeping up to nframe frames per traceback; when already
    tracing, only the limit changes."""
    global _nframe
    nframe = int(nframe)
    if not 1 <= nframe <= _MAX_NFRAME:
        raise ValueError(f"the number of frames must be in range [1; {_MAX_NFRAME}]")
    with _lock:
        _nframe = nframe
        if _tracker is None:
            _start_span()


def stop():
    """Stops tracing and forgets every trace (the span's capture file is removed)."""
    with _lock:
        _stop_span()


def is_tracing():
    """True when tracing."""
    return _tracker is not None


def clear_traces():
    """Forgets the traces so far, and resets the traced memory to 0: a new span starts (the
    blocks allocated before it are not traced, even when freed later)."""
    with _lock:
        if _tracker is not None:
            _stop_span()
            _start_span()


def get_traceback_limit():
    """The most frames a traceback keeps (start's nframe)."""
    return _nframe


def get_traced_memory():
    """(current, peak): the bytes of the traced blocks now, and their peak since start(),
    clear_traces() or reset_peak(); Python's allocator and native memory together."""
    with _lock:
        if _tracker is None:
            return (0, 0)
        since = ("--peak-since-seq", str(_peak_from)) if _peak_from else ()
        answer = _ask("--totals", *since)
    current = answer["in_use_bytes"]
    return (current, max(current, answer["peak_since"]["bytes"]))


def reset_peak():
    """Sets the peak of get_traced_memory() to the traced memory now: the peak counts from the
    span's next event on (asking the analyzer where the span is: one question)."""
    global _peak_from
    with _lock:
        if _tracker is not None:
            _peak_from = max(_ask("--totals")["next_seq"], 1)


def get_tracemalloc_memory():
    """The bytes memlens keeps the traces in: the span's capture file so far. (memlens keeps
    traces on disk, written by its own thread, not in a table in the process.)"""
    with _lock:
        if _tracker is None:
            return 0
        _tracker.flush()
        return os.path.getsize(_tracker.path)


def _tracebacks(stacks):
    """Stack id -> (frames most recent first, cut to the limit; total frames), each frames
    tuple interned: traces with the same traceback share the one tuple, as in the stdlib."""
    interned = {}
    out = {}
    for stack in stacks:
        frames = tuple((f["file"], f["line"]) for f in stack["frames"] if f["python"])
        total = len(frames)
        frames = frames[:_nframe] if frames else _UNKNOWN
        out[stack["id"]] = (interned.setdefault(frames, frames), max(total, 1))
    return out


def _get_traces():
    """Every traced block: [(domain, size, frames, total_nframe)], frames most recent first."""
    with _lock:
        if _tracker is None:
            return []
        answer = _ask("--python-frames")
    tracebacks = _tracebacks(answer["stacks"])
    return [(_DOMAINS.get(block["domain"], NATIVE_DOMAIN), block["size"],
             *tracebacks[block["stack"]]) for block in answer["blocks"]]


def _get_object_traceback(obj):
    """The frames (most recent first) where the block holding obj was allocated, or None."""
    with _lock:
        if _tracker is None:
            return None
        answer = _ask("--python-frames", "--containing", str(id(obj)))
    if not answer["blocks"]:
        return None
    return _tracebacks(answer["stacks"])[answer["blocks"][0]["stack"]][0]


def get_object_traceback(obj):
    """The Traceback where obj was allocated, or None when it was not traced."""
    frames = _get_object_traceback(obj)
    return None if frames is None else Traceback(frames)


def take_snapshot():
    """A Snapshot of the traced blocks (every domain)."""
    # Module globals, looked up at each call (CPython's test patches them).
    if not is_tracing():
        raise RuntimeError("the tracemalloc module must be tracing memory allocations to "
                           "take a snapshot")
    return Snapshot(_get_traces(), get_traceback_limit())


if hasattr(_stdlib, "_Frame"):
    _Frame = _stdlib._Frame
