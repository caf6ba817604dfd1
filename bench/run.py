#!/usr/bin/env python3
"""The native workloads for the single-purpose benchmark scripts, and the old entry point.

`python3 bench/run.py [ARGS]` is `python3 bench/suite.py --only churn_1t,churn_4t,deep_stacks
[ARGS]`. Scripts that measure one thing on the native workloads (sampling overhead, cost per
event by part) import their names, sizes and build from here: WORKLOADS maps a workload to
(source in bench/workloads without .cc, arguments before the iteration count).
"""
import sys

from suite import ITERATIONS, NATIVE_SOURCES as WORKLOADS, RESULTS, ROOT  # noqa: F401
from suite import build_native as build  # noqa: F401
import suite

if __name__ == "__main__":
    sys.argv[1:1] = ["--only", ",".join(WORKLOADS)]
    sys.exit(suite.main())
