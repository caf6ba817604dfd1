# Known Python and native allocations at marked lines, asked through the tracemalloc API:
# `tracemalloc_lines.py stdlib` uses the standard module, `tracemalloc_lines.py memlens` uses
# memlens.tracemalloc. Prints, as JSON, what each sees at the marked lines, by domain, with the
# traced memory right after allocating known bytes (tests/e2e/test_tracemalloc_api.py).
import json
import sys

import memlens_test_ext

if sys.argv[1] == "memlens":
    import memlens.tracemalloc as tracemalloc
    native_domain = tracemalloc.NATIVE_DOMAIN
else:
    import tracemalloc
    native_domain = None


def make():
    blob = bytearray(1_000_000)  # @blob
    words = [str(i) * 3 for i in range(1000)]  # @words
    return blob, words


def by_line(snapshot):
    """{line: [bytes, blocks]} of this file's lines, innermost frame."""
    found = {}
    for stat in snapshot.statistics("lineno"):
        if stat.traceback[0].filename == __file__:
            found[stat.traceback[0].lineno] = [stat.size, stat.count]
    return found


tracemalloc.start(5)
kept = make()
memlens_test_ext.alloc_without_gil(654_321)  # @native
snapshot = tracemalloc.take_snapshot()
result = {
    "python": by_line(snapshot.filter_traces([tracemalloc.DomainFilter(True, 0)])),
    "domains": sorted({trace.domain for trace in snapshot.traces}),
}
if native_domain is not None:
    result["native"] = by_line(snapshot.filter_traces([tracemalloc.DomainFilter(True, native_domain)]))
    result["without_native"] = by_line(
        snapshot.filter_traces([tracemalloc.DomainFilter(False, native_domain)]))

# get_traced_memory right after known bytes, from a clean slate.
tracemalloc.clear_traces()
python_bytes = b"x" * (1024 * 1024 - sys.getsizeof(b""))  # @traced
memlens_test_ext.alloc_without_gil(3_000_000)
result["traced"] = tracemalloc.get_traced_memory()
result["python_bytes"] = sys.getsizeof(python_bytes)
del python_bytes
result["traced_after_del"] = tracemalloc.get_traced_memory()
tracemalloc.stop()
result["traced_after_stop"] = tracemalloc.get_traced_memory()
print(json.dumps(result))
