# A function that appends to a global list on every call: the growth is at the append line.
# With the argument "tracemalloc" it prints instead what tracemalloc counts at that line (size),
# the reference the test holds memlens to (a free-threaded build's list array has a header of
# its own, which no sys.getsizeof shows).
import os
import sys

if sys.argv[1:] == ["tracemalloc"]:
    import tracemalloc
    tracemalloc.start()

history = []


def remember(i):
    history.append(bytearray(100))  # @append


for i in range(10_000):
    remember(i)
if sys.argv[1:] == ["tracemalloc"]:
    line = remember.__code__.co_firstlineno + 1
    print(sum(s.size for s in tracemalloc.take_snapshot().statistics("lineno")
              if s.traceback[0].lineno == line and s.traceback[0].filename == __file__))
else:
    print(sys.getsizeof(bytearray(100)), sys.getsizeof(history) - sys.getsizeof([]), flush=True)
os._exit(0)
