# Known bytes at known lines for the Python-lines-only mode (tests/e2e/test_python_only.py): a
# bytearray (Python's allocator), a malloc by a C extension called from Python, a malloc on a
# thread that never ran Python, and with the argument "numpy" an array's data.
import os
import sys

import memlens_test_ext


def make_bytearray():
    return bytearray(3_000_000)  # @bytearray


def c_malloc():
    # An allocation with the GIL first, so the function's code object gets its id (a thread
    # without the GIL cannot register it); a bytearray: no free list hands one back.
    ready = bytearray(1)
    memlens_test_ext.alloc_without_gil(2_000_003)  # @c_malloc
    return ready


def make_array():
    import numpy
    return numpy.ones(500_000)  # @numpy


kept = make_bytearray()
c_malloc()  # @call_c
memlens_test_ext.alloc_in_native_thread(1_000_007)  # @native_thread
array = make_array() if sys.argv[1:] == ["numpy"] else None
print(len(kept), flush=True)
os._exit(0)
