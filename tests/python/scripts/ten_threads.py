# Ten Python threads, each keeping one bytearray of its own size (an object and its buffer):
# every block the capture sees freed was seen allocated (no thread's start or exit frees a
# block the capture missed).
import os
import threading

kept = [None] * 10
# The sizes are made here: an int made in a thread may come from the interpreter's free list
# (3.14) or not, and go back to it unseen.
sizes = [100_000 + i for i in range(10)]


def worker(i, size):
    kept[i] = bytearray(size)  # @thread_block


threads = [threading.Thread(target=worker, args=(i, sizes[i])) for i in range(10)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sum(map(len, kept)), flush=True)
os._exit(0)  # the blocks stay in use at exit (no interpreter finalization)
