# Allocations in a Python thread, in a generator, in a coroutine, and from C with the GIL
# released or in a thread that never ran Python.
import asyncio
import os
import threading

import memlens_test_ext

kept = []


def worker():
    # The list grows on a line of its own: a free-threaded build frees its old array later.
    blob = bytearray(3_000_000)  # @thread
    kept.append(blob)


def generate():
    for _ in range(3):
        yield bytearray(1_000_000)  # @generator


async def produce():
    return bytearray(2_000_000)  # @coroutine


thread = threading.Thread(target=worker)
thread.start()
thread.join()
kept.extend(list(generate()))  # @consume
kept.append(asyncio.run(produce()))
memlens_test_ext.alloc_without_gil(5_000_000)  # @nogil
memlens_test_ext.alloc_in_native_thread(7_000_000)
print("done", flush=True)
os._exit(0)
