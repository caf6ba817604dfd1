# Known amounts at known lines; prints the sizes Python reports, then leaves without
# finalization (os._exit) so that "in use at exit" is what the program held. With the argument
# "tracemalloc" it prints instead what tracemalloc counts at each marked line (size, count),
# the reference the test holds memlens to. Both runs do the same Python work up to the marked
# lines (tracemalloc is imported by both): 3.14 takes ints from a free list of ints freed
# before, so the count of ints allocated at a line depends on what ran before it.
import gc
import os
import sys
import tracemalloc

if sys.argv[1:] == ["tracemalloc"]:
    tracemalloc.start()


def make_bytearray():
    return bytearray(50_000_000)  # @bytearray


blob = make_bytearray()
# 3.14 keeps up to 100 freed ints and hands them out again: empty that free list first, so that
# every int made at the marked line is a new block, whatever ran before (memlens's hooks or not).
spare = [i for i in range(10_000_000, 10_001_000)]
numbers = [i for i in range(1000, 1_001_000)]  # @ints
# A free-threaded build frees the list's outgrown arrays later, when no thread can still read
# them; a collection frees them now, so both runs count the same blocks at the line.
gc.collect()
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
