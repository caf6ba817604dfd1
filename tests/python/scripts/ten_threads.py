# Ten Python threads, each keeping one bytearray of its own size (an object and its buffer):
# every block the capture sees freed was seen allocated (no thread's start or exit frees a
# block the capture missed).
import os
import threading

kept = [None] * 10


def worker(i):
    kept[i] = bytearray(100_000 + i)  # @thread_block


threads = [threading.Thread(target=worker, args=(i,)) for i in range(10)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sum(map(len, kept)), flush=True)
os._exit(0)  # the blocks stay in use at exit (no interpreter finalization)
