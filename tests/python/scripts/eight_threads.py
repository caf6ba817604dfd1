# Eight threads released at once by a barrier, each allocating Python objects at the same marked
# lines (in a free-threaded build they run truly in parallel, and meet the code object of work()
# for the first time together). Prints whether the GIL is enabled, then leaves without
# finalization (os._exit) so that "in use at exit" is what the threads made. With the argument
# "tracemalloc" it prints instead what tracemalloc counts at each marked line (size, count).
import os
import sys
import threading

TRACING = sys.argv[1:] == ["tracemalloc"]
if TRACING:
    import tracemalloc
    tracemalloc.start()

THREADS = 8
barrier = threading.Barrier(THREADS)
kept = [None] * THREADS


class Node:
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t


# Only objects of types without free lists are kept from the marked lines (str, bytearray,
# instances of a class): a free list (tuples, lists, dicts, floats, 3.14's ints) hands a thread
# back an object it freed before, depending on how the threads met at the barrier, and that
# object is no allocation at all.
def work(t):
    words, blobs, nodes = [None] * 4000, [None] * 50, [None] * 2000
    for i in range(4000):
        words[i] = f"w{t}-{i:05}"  # @words
    for i in range(50):
        blobs[i] = bytearray(1000 + 8 * i + t)  # @blobs
    for i in range(2000):
        nodes[i] = Node(t)  # @nodes
    return words, blobs, nodes


def run(t):
    barrier.wait()
    kept[t] = work(t)


threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
if TRACING:
    stats = tracemalloc.take_snapshot().statistics("lineno")
    source = open(__file__).read().splitlines()
    for marker in ("words", "blobs", "nodes"):
        line = 1 + next(i for i, text in enumerate(source) if text.endswith("# @" + marker))
        found = [s for s in stats if s.traceback[0].lineno == line and
                 s.traceback[0].filename == __file__]
        print(found[0].size if found else 0, found[0].count if found else 0)
else:
    print("gil", sys._is_gil_enabled(), flush=True)
os._exit(0)
