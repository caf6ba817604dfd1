"""bench/workloads/api_calls.py: the per-call cost of memlens's Python API (memlens.marker,
memlens.Heap.alloc/free), in whatever state the process runs in. Run by bench/api_bench.py.
For each operation: 5 batches of N calls; prints the median batch's ns per operation."""
import sys
import time

import memlens


def measure(name, n, fn):
    batches = []
    for _ in range(5):
        start = time.perf_counter_ns()
        fn(n)
        batches.append((time.perf_counter_ns() - start) / n)
    batches.sort()
    print(f"op={name} ns={batches[2]:.3f}")


def markers(n):
    marker = memlens.marker
    for _ in range(n):
        marker("tick")


def alloc_free(n):
    heap = memlens.Heap("bench")
    for i in range(n):
        address = 0x1000 + (i & 255) * 64
        heap.alloc(address, 64)
        heap.free(address)


def empty_loop(n):
    for _ in range(n):
        pass


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    measure("py_empty_loop", n, empty_loop)
    measure("py_marker", n, markers)
    measure("py_heap_alloc+free", n, alloc_free)


main()
