"""memlens's instrumentation API for Python programs: named heaps, markers, snapshots, regions.

    pool = memlens.Heap("particles")          # a heap of the program's own (a pool, a cache)
    pool.alloc(address, size, type="Particle")  # it handed out `size` bytes at `address`
    pool.free(address); pool.realloc(old, new, size); pool.reset(); pool.destroy()
    memlens.marker("frame")                   # a point on the timeline: CAPTURE@marker:frame#3
    memlens.snapshot("loaded")                # a snapshot request: CAPTURE@snapshot:loaded
    with memlens.region("update"): ...        # markers "update" at entry and exit

Under `memlens run` (or `python3 -m memlens run`) the calls reach the agent's C functions
(include/memlens/memlens.h) through ctypes, with the GIL held, so each event carries the Python
lines that made it. Inside a span (memlens.Tracker, tracker.py) they reach the agent the span
loaded, and go into the span's capture. Otherwise every call is a no-op that returns at once. A
Heap belongs to the span it was created in (created while nothing records, it is a no-op).
Addresses and sizes are whatever the program's heap hands out: real addresses, offsets into a
buffer, or id(obj) for a pool of objects. Names are copied by the agent. Thread-safe.
"""
import contextlib
import ctypes

__all__ = ["Heap", "marker", "snapshot", "region", "is_recording"]


# Argument types as tuples, which ctypes keeps as they are: a list would be turned into a new
# tuple, taken for good from the interpreter's free list (a free-threaded build's next call in
# a span would then allocate its argument tuple anew, on the program's line).
_SIGNATURES = {
    "memlens_heap_create": ((ctypes.c_char_p,), ctypes.c_void_p),
    "memlens_heap_alloc": ((ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t), None),
    "memlens_heap_alloc_typed": ((ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_char_p), None),
    "memlens_heap_free": ((ctypes.c_void_p, ctypes.c_void_p), None),
    "memlens_heap_realloc": ((ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_size_t), None),
    "memlens_heap_reset": ((ctypes.c_void_p,), None),
    "memlens_heap_destroy": ((ctypes.c_void_p,), None),
    "memlens_add_marker": ((ctypes.c_char_p, ctypes.c_char_p), None),
    "memlens_take_snapshot": ((ctypes.c_char_p,), None),
    "memlens_is_recording": ((), ctypes.c_int),
}
_lib = None  # the agent's functions, once there is an agent to call


def bind(lib):
    """From now on the calls go to `lib`, the agent's functions (a ctypes.PyDLL: the GIL stays
    held, so Python frames are read): at import when `memlens run` records this process, or
    when the first span loads the agent (tracker.py). The functions are looked up and typed
    here, before anything records, so a call inside a span allocates nothing of ours."""
    global _lib
    for function, (argtypes, restype) in _SIGNATURES.items():
        getattr(lib, function).argtypes = argtypes
        getattr(lib, function).restype = restype
    _lib = lib


def _bind_recording_agent():
    """Binds the preloaded agent when it records this process (`memlens run`)."""
    try:
        lib = ctypes.PyDLL(None)
        recording = lib.memlens_is_recording
    except (OSError, AttributeError):
        return
    recording.restype = ctypes.c_int
    if recording():
        bind(lib)


_bind_recording_agent()
_names = {}  # str -> bytes, encoded once per name


def _name(text):
    if text is None:
        return None
    encoded = _names.get(text)
    if encoded is None:
        encoded = _names[text] = str(text).encode("utf-8", "surrogateescape")
    return encoded


def is_recording():
    """True when this process is being recorded by memlens now (`memlens run`, or a span)."""
    return _lib is not None and bool(_lib.memlens_is_recording())


def marker(name, category=None):
    """A marker on the timeline, named, with an optional category (a no-op when nothing
    records this process)."""
    if _lib is not None:
        _lib.memlens_add_marker(_name(name), _name(category))


def snapshot(name):
    """Asks for a snapshot of what is in use now: CAPTURE@snapshot:NAME (a no-op when nothing
    records this process)."""
    if _lib is not None:
        _lib.memlens_take_snapshot(_name(name))


@contextlib.contextmanager
def region(name):
    """Markers `name` (category "begin") at entry and `name` (category "end") at exit."""
    marker(name, "begin")
    try:
        yield
    finally:
        marker(name, "end")


class Heap:
    """A named heap of the program's own. Report each block after handing it out (alloc) and
    before taking it back (free), as the allocator itself would see them. Usable as a context
    manager: the heap is destroyed at exit."""

    __slots__ = ("name", "_handle")

    def __init__(self, name):
        self.name = name
        self._handle = _lib.memlens_heap_create(_name(name)) if _lib is not None else None

    def alloc(self, address, size, type=None):
        """The heap handed out `size` bytes at `address`; `type` names what the block holds."""
        if self._handle:
            if type is None:
                _lib.memlens_heap_alloc(self._handle, address, size)
            else:
                _lib.memlens_heap_alloc_typed(self._handle, address, size, _name(type))

    def free(self, address):
        """The block at `address` goes back to the heap."""
        if self._handle:
            _lib.memlens_heap_free(self._handle, address)

    def realloc(self, old_address, new_address, size):
        """The block at `old_address` became `size` bytes at `new_address`."""
        if self._handle:
            _lib.memlens_heap_realloc(self._handle, old_address, new_address, size)

    def reset(self):
        """Every block of the heap is released at once."""
        if self._handle:
            _lib.memlens_heap_reset(self._handle)

    def destroy(self):
        """The heap is gone, with its blocks; later calls on it do nothing."""
        if self._handle:
            _lib.memlens_heap_destroy(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False
