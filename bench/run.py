#!/usr/bin/env python3
"""The native workloads for the single-purpose benchmark scripts, and the old entry point.

`python3 bench/run.py [ARGS]` is `python3 bench/suite.py [ARGS]` on the native workloads only.
Scripts that measure one thing on the native workloads (sampling overhead, cost per event by
part) import their names, sizes and build from here: WORKLOADS maps a workload to (its source
in bench/workloads, the arguments before the iteration count); build(source) compiles it.
"""
import sys

from suite import ITERATIONS, NATIVE_SOURCES, RESULTS, ROOT  # noqa: F401
from suite import build_native as build  # noqa: F401
import suite

WORKLOADS = {name: (source, extra) for name, (source, extra, _) in NATIVE_SOURCES.items()}

if __name__ == "__main__":
    sys.argv[1:1] = ["--only", ",".join(WORKLOADS)]
    sys.exit(suite.main())
