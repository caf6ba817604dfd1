# Known amounts at known lines; prints the sizes Python reports, then leaves without
# finalization (os._exit) so that "in use at exit" is what the program held. With the argument
# "tracemalloc" it prints instead what tracemalloc counts at each marked line (size, count),
# the reference the test holds memlens to. Both runs do the same Python work up to the marked
# lines (tracemalloc is imported by both): 3.14 takes ints from a free list of ints freed
# before, so the count of ints allocated at a line depends on what ran before it.
import os
import sys
import tracemalloc

if sys.argv[1:] == ["tracemalloc"]:
    tracemalloc.start()


def make_bytearray():
    return bytearray(50_000_000)  # @bytearray


blob = make_bytearray()
numbers = [i for i in range(1000, 1_001_000)]  # @ints
if sys.argv[1:] == ["tracemalloc"]:
    stats = tracemalloc.take_snapshot().statistics("lineno")
    source = open(__file__).read().splitlines()
    for marker in ("bytearray", "ints"):
        line = 1 + next(i for i, text in enumerate(source) if text.endswith("# @" + marker))
        found = [s for s in stats if s.traceback[0].lineno == line and
                 s.traceback[0].filename == __file__]
        print(found[0].size if found else 0, found[0].count if found else 0)
else:
    print(sys.getsizeof(blob), sys.getsizeof(numbers), flush=True)
os._exit(0)
