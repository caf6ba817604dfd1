"""memlens's instrumentation API for Python programs: named heaps, markers, snapshots, regions.

    pool = memlens.Heap("particles")          # a heap of the program's own (a pool, a cache)
    pool.alloc(address, size, type="Particle")  # it handed out `size` bytes at `address`
    pool.free(address); pool.realloc(old, new, size); pool.reset(); pool.destroy()
    memlens.marker("frame")                   # a point on the timeline: CAPTURE@marker:frame#3
    memlens.snapshot("loaded")                # a snapshot request: CAPTURE@snapshot:loaded
    with memlens.region("update"): ...        # markers "update" at entry and exit

Under `memlens run` (or `python3 -m memlens run`) the calls reach the agent's C functions
(include/memlens/memlens.h) through ctypes, with the GIL held, so each event carries the Python
lines that made it. Otherwise, decided once at import, every call is a no-op that returns at
once. Addresses and sizes are whatever the program's heap hands out: real addresses, offsets into
a buffer, or id(obj) for a pool of objects. Names are copied by the agent. Thread-safe.
"""
import contextlib
import ctypes

__all__ = ["Heap", "marker", "snapshot", "region", "is_recording"]


def _agent():
    """The agent's functions when it is loaded and records this process, else None."""
    try:
        lib = ctypes.PyDLL(None)  # PyDLL: the GIL stays held, so Python frames are read
        recording = lib.memlens_is_recording
    except (OSError, AttributeError):
        return None
    recording.restype = ctypes.c_int
    if not recording():
        return None
    ptr, size, name = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
    signatures = {
        "memlens_heap_create": ([name], ptr),
        "memlens_heap_alloc": ([ptr, ptr, size], None),
        "memlens_heap_alloc_typed": ([ptr, ptr, size, name], None),
        "memlens_heap_free": ([ptr, ptr], None),
        "memlens_heap_realloc": ([ptr, ptr, ptr, size], None),
        "memlens_heap_reset": ([ptr], None),
        "memlens_heap_destroy": ([ptr], None),
        "memlens_add_marker": ([name, name], None),
        "memlens_take_snapshot": ([name], None),
    }
    for function, (argtypes, restype) in signatures.items():
        getattr(lib, function).argtypes = argtypes
        getattr(lib, function).restype = restype
    return lib


_lib = _agent()
_names = {}  # str -> bytes, encoded once per name


def _name(text):
    if text is None:
        return None
    encoded = _names.get(text)
    if encoded is None:
        encoded = _names[text] = str(text).encode("utf-8", "surrogateescape")
    return encoded


def is_recording():
    """True when this process is being recorded by memlens."""
    return _lib is not None


if _lib is None:
    def marker(name, category=None):
        """A marker on the timeline (a no-op: this process is not being recorded)."""

    def snapshot(name):
        """A snapshot request (a no-op: this process is not being recorded)."""
else:
    def marker(name, category=None):
        """A marker on the timeline, named, with an optional category."""
        _lib.memlens_add_marker(_name(name), _name(category))

    def snapshot(name):
        """Asks for a snapshot of what is in use now: CAPTURE@snapshot:NAME."""
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
