"""Recording spans of a running Python program, without `memlens run`:

    with memlens.Tracker("load.mlens") as tracker:   # or t = memlens.start(); ...; memlens.stop()
        load()
    memlens.summary(tracker.path) ...                 # every view works on the span's capture

Each start..stop span writes a capture of its own (its END record says "stopped"). What a span
counts (docs/api.md, "Spans"): the Python allocator's blocks and, with native=True, the C/C++
allocations of the program and its extension modules (the agent patches their GOT/PLT slots at
start and puts them back at stop); blocks allocated before start and freed inside are not
counted; blocks allocated inside and still live at stop are in use at the capture's end.

The agent (libmemlens.so, beside the memlens executable: ../lib) is loaded on the first start
with ctypes.PyDLL (the GIL stays held: the agent puts Python's allocator hooks on under it) as
RTLD_LOCAL | RTLD_NODELETE: its symbols never replace the program's, and it is never unloaded
(pointers to its hooks may outlive a span). Under `memlens run` the agent is already there and
records the whole process: start() then raises RuntimeError with the agent's reason.
"""
import ctypes
import itertools
import os
import pathlib
import threading

from memlens import api

__all__ = ["Tracker", "start", "stop"]

_lock = threading.Lock()
_agent = None
_spans = itertools.count(1)  # N in the default name: memlens-%e-%p-N.mlens
_current = None  # the Tracker that memlens.start() started


def agent_path():
    """The agent library: MEMLENS_AGENT, else where the memlens executable finds it (../lib from
    it: inside the installed package, or in a build tree during development)."""
    if os.environ.get("MEMLENS_AGENT"):
        return pathlib.Path(os.environ["MEMLENS_AGENT"])
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here / "lib", here.parents[2] / "build" / "lib"]
    if os.environ.get("MEMLENS_BUILD_DIR"):
        candidates.insert(0, pathlib.Path(os.environ["MEMLENS_BUILD_DIR"]) / "lib")
    for folder in candidates:
        if (folder / "libmemlens.so").is_file():
            return folder / "libmemlens.so"
    raise RuntimeError("memlens: the agent library libmemlens.so is not installed next to this "
                       "package (reinstall with `pip install .`, or set MEMLENS_AGENT)")


def _load_agent():
    """The agent's span functions: the preloaded agent's, else the library loaded now."""
    global _agent
    with _lock:
        if _agent is None:
            lib = ctypes.PyDLL(None)  # PyDLL: the GIL stays held during the calls
            if not hasattr(lib, "memlens_start_with"):  # not preloaded: load it, privately
                mode = os.RTLD_NOW | os.RTLD_LOCAL | getattr(os, "RTLD_NODELETE", 0x1000)
                path = agent_path()
                try:
                    lib = ctypes.PyDLL(str(path), mode=mode)
                except OSError as error:
                    raise RuntimeError(f"memlens: cannot load the agent {path}: {error}") from None
            lib.memlens_start_with.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.c_size_t]
            lib.memlens_start_with.restype = ctypes.c_int
            lib.memlens_stop.argtypes = []
            lib.memlens_stop.restype = ctypes.c_int
            lib.memlens_flush.argtypes = []
            lib.memlens_flush.restype = None
            lib.memlens_is_recording.restype = ctypes.c_int
            api.bind(lib)  # markers, snapshots and heaps go into the spans too
            _refill_tuple_free_lists()
            _agent = lib
        return _agent


def _refill_tuple_free_lists():
    """Typing the agent's functions keeps small tuples for good (ctypes' argument converters),
    taken from the interpreter's free lists of tuples. A free-threaded build's lists are per
    thread and may be short then: the program's first call in the span would allocate its
    argument tuple anew, a block of ours on the program's line. Tuples made and dropped here go
    back to those lists."""
    spare = [tuple(range(size)) for size in range(1, 6) for _ in range(16)]
    del spare


def _program_name():
    """What the agent's %e is: the name of the process's executable."""
    try:
        return os.path.basename(os.readlink("/proc/self/exe"))
    except OSError:
        return "python"


def _expand(pattern):
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "%" and i + 1 < len(pattern) and pattern[i + 1] in "pe":
            out.append(str(os.getpid()) if pattern[i + 1] == "p" else _program_name())
            i += 2
        else:
            out.append(pattern[i])
            i += 1
    return os.path.abspath("".join(out))


class Tracker:
    """One span: start() records from now on into `path` (%p: pid, %e: program name; None:
    memlens-%e-%p-N.mlens in the current directory, N counting this process's spans); stop()
    ends it and returns the capture's path once the capture is complete. One span at a time
    in a process. native=False records Python's allocator only; sample_rate=N samples one byte
    in N (docs/sampling.md: 524288, 512 KiB, is memlens run --sample's rate; blocks of N bytes
    or more are recorded whole; a process keeps its first span's rate); python_frames=N keeps the
    innermost N Python frames per allocation; python_stacks=True records Python lines only, no
    native frames (no native unwinding: far cheaper; docs/python.md). A context manager: start
    at entry, stop at exit.
    """

    def __init__(self, path=None, *, native=True, sample_rate=None, python_frames=None,
                 python_stacks=None):
        self._pattern = os.fspath(path) if path is not None else None
        self.native = bool(native)
        self.sample_rate = sample_rate
        self.python_frames = python_frames
        self.python_stacks = python_stacks  # None: MEMLENS_PYTHON_STACKS, else False or True
        self.path = None  # the capture's path, expanded, once started
        self._recording = False

    def _options(self):
        options = [f"native={int(self.native)}"]
        if self.python_stacks is not None:
            options.append(f"python_stacks={int(bool(self.python_stacks))}")
        for key in ("sample_rate", "python_frames"):
            value = getattr(self, key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ValueError(f"memlens: {key} must be a whole number >= 0, not {value!r}")
                options.append(f"{key}={value}")
        return ",".join(options)

    def start(self):
        """Starts the span. Raises RuntimeError with the agent's reason when it cannot (a span
        is already recording, the file cannot be written, ...); nothing is recorded then."""
        if self._recording:
            raise RuntimeError(f"memlens: this Tracker is already recording into {self.path}")
        options = self._options()
        lib = _load_agent()
        pattern = self._pattern or f"memlens-%e-%p-{next(_spans)}.mlens"
        path = _expand(pattern)
        error = ctypes.create_string_buffer(1024)
        # Set before the call: allocations of ours once the span records would be in it.
        self.path, self._recording = path, True
        if lib.memlens_start_with(os.fsencode(path), options.encode(), error, len(error)) != 0:
            self.path, self._recording = None, False
            raise RuntimeError("memlens: " + error.value.decode("utf-8", "replace"))
        return self

    def stop(self):
        """Ends the span; returns the capture's path, complete (its END record written)."""
        if not self._recording:
            raise RuntimeError("memlens: not recording: this Tracker was not started")
        if _agent.memlens_stop() != 0:
            # Another thread is starting or stopping a span, or the process is exiting: the
            # agent said which on stderr.
            self._recording = bool(_agent.memlens_is_recording())
            raise RuntimeError("memlens: the span was not stopped (the reason is on stderr)")
        self._recording = False
        return self.path

    def flush(self):
        """Everything recorded so far is in the capture file when this returns, so the views
        can read the capture while the span goes on."""
        if self._recording:
            _agent.memlens_flush()

    @property
    def recording(self):
        return self._recording

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self._recording:
            self.stop()
        return False


def start(path=None, **options):
    """memlens.Tracker(path, **options).start(), kept for memlens.stop()."""
    global _current
    tracker = Tracker(path, **options).start()
    _current = tracker
    return tracker


def stop():
    """Ends the span memlens.start() began; returns its capture's path."""
    global _current
    if _current is None:
        raise RuntimeError("memlens: not recording: memlens.start() was not called")
    tracker, _current = _current, None
    return tracker.stop()
