"""Runs CPython's own Lib/test/test_tracemalloc.py against memlens.tracemalloc (issue 28).

    python3 tests/python/cpython_tracemalloc.py [--report REPORT.json] [--lib LIBDIR]

memlens.tracemalloc is put in place of the standard module (sys.modules["tracemalloc"]) before
the test file is imported, so the tests, and test.support, call memlens. The test file and
test.support are the interpreter's own (LIBDIR/test; an interpreter built without them: pass
--lib with a Lib/ extracted from its source tarball, which tests/e2e/test_tracemalloc_api.py
does). The tests that cannot exercise memlens are not run, each with its reason (NOT_RUN); every
other test must pass. The report lists every test with its outcome; the exit status is 0 when
every test that ran passed and every skip is one of NOT_RUN's.
"""
import argparse
import json
import os
import sys
import unittest

# Test ids (class.method, or class for all its tests) not run, and why.
NOT_RUN = {
    "TestTracemallocEnabled.test_new_reference":
        "CPython's internal hook: an object reused from a free list gets a new traceback "
        "through _PyTraceMalloc_NewReference, which CPython calls only while its own "
        "tracemalloc traces; no allocation happens, so there is nothing for memlens to see",
    "TestTracemallocEnabled.test_fork":
        "memlens records no span in a process forked from a recording one (the agent refuses: "
        "'this process was forked while its parent recorded'), so the child's is_tracing() is "
        "False where the test wants the child traced",
    "TestCommandLine":
        "runs CPython itself in a child process (PYTHONTRACEMALLOC, -X tracemalloc, -E, "
        "_testcapi.test_pymem_alloc0): it tests the interpreter's start-up and the standard "
        "module, not memlens.tracemalloc",
    "TestCAPI":
        "C API (PyTraceMalloc_Track/Untrack, _PyTraceMalloc_GetTraceback through _testcapi): "
        "those calls reach CPython's own tracemalloc; memlens does not hook them",
}


def not_run_reason(test_id):
    """The reason a test (module.Class.method) is not run, or None."""
    cls, method = test_id.split(".")[-2:]
    return NOT_RUN.get(f"{cls}.{method}") or NOT_RUN.get(cls)


class Recorder(unittest.TextTestResult):
    """Keeps each test's outcome for the report."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}

    def _record(self, test, outcome, detail=""):
        self.outcomes[test.id()] = {"outcome": outcome, "detail": detail}

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "not run" if not_run_reason(test.id()) else "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "unexpected success")


def tests_of(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from tests_of(item)
        else:
            yield item


def at_depth(depth, function):
    """function() called `depth` frames further down. CPython runs this test file under regrtest,
    whose frames put whatever a test allocates more than 10 frames deep, and test_snapshot
    relies on it (it wants a trace with more than 10 frames: "This can vary"); this runner's own
    stack is shallower, so it runs the suite as deep as regrtest would."""
    return function() if depth == 0 else at_depth(depth - 1, function)


REGRTEST_DEPTH = 16


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", help="write the outcome of each test here (JSON)")
    parser.add_argument("--lib", help="a Lib/ directory holding test/ (default: the interpreter's)")
    args = parser.parse_args()

    import memlens.tracemalloc  # before the test file: it must get memlens' module
    sys.modules["tracemalloc"] = memlens.tracemalloc
    if args.lib:
        sys.path.insert(0, os.path.abspath(args.lib))
        for name in [n for n in sys.modules if n == "test" or n.startswith("test.")]:
            del sys.modules[name]
    module = __import__("test.test_tracemalloc", fromlist=["*"])
    assert module.tracemalloc is memlens.tracemalloc, "the shim is not in place"

    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    for test in tests_of(suite):
        reason = not_run_reason(test.id())
        if reason:  # the method, wrapped: the class's own setUp does not run either
            setattr(test, test._testMethodName, unittest.skip(reason)(getattr(test, test._testMethodName)))
            test.setUp = test.tearDown = lambda: None
    runner = unittest.TextTestRunner(resultclass=Recorder, verbosity=2, stream=sys.stderr)
    result = at_depth(REGRTEST_DEPTH, lambda: runner.run(suite))
    if args.report:
        with open(args.report, "w") as out:
            json.dump({"python": sys.version, "file": module.__file__,
                       "tests": result.outcomes}, out, indent=1)
    bad = [t for t, o in result.outcomes.items() if o["outcome"] not in ("passed", "not run")]
    for test_id in bad:
        print(f"NOT PASSED: {test_id}: {result.outcomes[test_id]['outcome']}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
