"""What a call of memlens.tracemalloc costs, next to the standard module's (docs/tracemalloc.md):
medians of 5 calls (3 for take_snapshot) after spans of growing size.

    PYTHONPATH=src/python MEMLENS_BUILD_DIR=build python3 bench/tracemalloc_bench.py memlens
    python3 bench/tracemalloc_bench.py stdlib
"""
import statistics
import sys
import time

if sys.argv[1:] == ["memlens"]:
    import memlens.tracemalloc as tracemalloc
elif sys.argv[1:] == ["stdlib"]:
    import tracemalloc
else:
    sys.exit("usage: tracemalloc_bench.py memlens|stdlib")

# (strings kept, strings allocated and freed): the span the questions are asked about.
SPANS = [(1000, 0), (10_000, 100_000), (100_000, 1_000_000)]


def median_ms(call, rounds=5):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 2)


for kept_count, churn in SPANS:
    tracemalloc.start(1)
    kept = [str(i) * 3 for i in range(kept_count)]
    for _ in range(churn // 1000):
        passing = [str(j) for j in range(1000)]
    obj = kept[-1]
    figures = {
        "get_traced_memory": median_ms(tracemalloc.get_traced_memory),
        "reset_peak": median_ms(tracemalloc.reset_peak),
        "get_object_traceback": median_ms(lambda: tracemalloc.get_object_traceback(obj)),
        "take_snapshot": median_ms(tracemalloc.take_snapshot, rounds=3),
    }
    tracemalloc.stop()
    figures["start+stop"] = median_ms(lambda: (tracemalloc.start(1), tracemalloc.stop()))
    print(sys.argv[1], f"kept={kept_count} churned={churn}", figures, flush=True)
