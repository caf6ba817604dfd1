# The interpreter's own frames fold: a list growing (allocated by the interpreter's list_resize)
# and a bytearray made by a Python function that a C extension calls.
import gc
import os
import sys

import memlens_test_ext

items = []
kept = []


def grow():
    for _ in range(50_000):
        items.append(None)  # @append


def make():
    kept.append(bytearray(3_000_000))  # @make


grow()  # @grow
memlens_test_ext.call(make)  # @call
gc.collect()  # a free-threaded build frees the list's outgrown arrays late: now
empty = sys.getsizeof([])
print(sys.getsizeof(items) - empty, sys.getsizeof(kept[0]), sys.getsizeof(kept) - empty, flush=True)
os._exit(0)
