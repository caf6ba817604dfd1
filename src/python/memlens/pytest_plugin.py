"""memlens's pytest plugin (entry point `pytest11` in pyproject.toml; docs/pytest.md).

    pytest --memlens                       # each test's peak and leaks, the biggest in a summary
    @pytest.mark.limit_memory("24 MB")     # fail when the test's peak is over 24 MiB
    @pytest.mark.limit_leaks("1 MB")       # fail when one stack leaks more than 1 MiB
    pytest --memlens --memlens-fail-on-increase   # fail when a test's peak grew since last time

Each recorded test runs inside a memlens.Tracker span of its own (only the test's call: not
its fixtures, not pytest's bookkeeping) and the span's capture is asked with the same views
as the command line (memlens._cli), so the figures are those of `memlens top/leaks`.

Leaks without noise (measured in docs/pytest.md): a full garbage collection before the span
starts and before it stops (cycles are garbage, not leaks, and a full collection empties the
interpreter's free lists, which otherwise look like blocks the test kept), and the blocks that
the interpreter keeps for itself on a first use (imports, the caches of re, typing, linecache,
logging) are set apart by the stack that allocated them (RUNTIME_SUPPRESSIONS, the analyzer's
--exclude patterns), as is what pytest itself holds during the call (a stack whose site is in
pytest or pluggy).

Inert unless asked: without --memlens (or the ini flag) and without a marker, a test costs one
marker look-up; importing this module loads only the standard library and memlens's Python
package (ctypes), never the agent, which a span's start loads.
"""
import gc
import os
import re

import pytest

from memlens._sizes import format_size, parse_size

# Stacks whose blocks the Python runtime keeps for itself after a first use: a frame matching
# one of these (the analyzer's filter patterns, docs/json-output.md) keeps the stack out of the
# leaks. Each line names who holds the blocks.
RUNTIME_SUPPRESSIONS = (
    "file:<frozen importlib.*>",      # modules imported in a test stay in sys.modules
    "file:*/importlib/*",
    "file:*/re/_compiler.py",         # re's pattern cache (re._cache)
    "file:*/re/_parser.py",
    "file:*/sre_compile.py",
    "file:*/linecache.py",            # linecache's source lines (tracebacks, warnings, inspect)
    "file:*/tokenize.py",
    "file:*/typing.py",               # typing's parametrised-type caches
    "file:<frozen abc>",              # ABCs' isinstance/issubclass caches
    "file:*/_py_abc.py",
    "file:*/logging/__init__.py",     # loggers' level caches, handlers' records (caplog)
    "function:_PyObjectStackChunk_New",  # free-threaded gc's per-thread cache of chunks
    # The tracker itself: this package's folder as its code objects name it (a pattern such as
    # */memlens/* hid every stack of a project, or of an interpreter, under a folder of that
    # name: CI's interpreters are built under ~/.cache/memlens/). fnmatch's special characters
    # in the path are escaped.
    "file:" + re.sub(r"([*?[\\])", r"\\\1", os.path.dirname(__file__)) + "/*",
)

_STACK_FRAMES = 16  # frames of each stack shown in a failure


def _tolerance(text):
    """--memlens-tolerance: "10%" (of the baseline) or a size ("64 KB"): (fraction, bytes)."""
    text = text.strip()
    if text.endswith("%"):
        try:
            return float(text[:-1]) / 100, 0
        except ValueError:
            pass
    else:
        try:
            return 0.0, parse_size(text)
        except ValueError:
            pass
    raise pytest.UsageError(f"memlens: invalid --memlens-tolerance {text!r}: a percentage of the "
                            "baseline (\"10%\") or a size (\"64 KB\")")


def pytest_addoption(parser):
    group = parser.getgroup("memlens", "memory profiling with memlens (docs/pytest.md)")
    group.addoption("--memlens", action="store_true", default=None,
                    help="record each test under memlens and report peaks and leaks")
    group.addoption("--memlens-most", type=int, default=5, metavar="N",
                    help="tests listed in the summary, by peak (default 5; 0: none)")
    group.addoption("--memlens-dir", metavar="DIR", default=None,
                    help="keep each test's capture in DIR (by default they are deleted)")
    group.addoption("--memlens-no-native", action="store_true", default=False,
                    help="record Python's allocator only, not malloc and mmap")
    group.addoption("--memlens-fail-on-increase", action="store_true", default=False,
                    help="fail a test whose peak grew beyond --memlens-tolerance since the last "
                         "run that passed (baselines in pytest's cache)")
    group.addoption("--memlens-tolerance", default="10%", metavar="PCT|SIZE",
                    help="growth allowed by --memlens-fail-on-increase: \"10%%\" (default) of "
                         "the baseline or a size such as \"64 KB\"")
    parser.addini("memlens", type="bool", default=False, help="same as --memlens")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "limit_memory(size, *, current_thread_only=False): fail when the test's peak "
        "memory is over size (\"24 MB\"), listing the stacks in use at the peak (memlens)")
    config.addinivalue_line(
        "markers", "limit_leaks(size, *, filter_fn=None, current_thread_only=False): fail when "
        "one stack leaks more than size (\"1 MB\") by the test's end, listing them (memlens)")
    enabled = config.getoption("memlens")
    if enabled is None:
        enabled = config.getini("memlens")
    if config.getoption("memlens_fail_on_increase") and not enabled:
        raise pytest.UsageError("memlens: --memlens-fail-on-increase needs --memlens")
    config.pluginmanager.register(_Plugin(config, bool(enabled)), "memlens-plugin")


class _Limits:
    """A test's markers, parsed (a bad size fails that test, not the run)."""

    def __init__(self, item):
        self.memory = self.leaks = None
        self.filter_fn = None
        self.current_thread_only = False
        for name in ("limit_memory", "limit_leaks"):
            marker = item.get_closest_marker(name)
            if marker is None:
                continue
            allowed = {"current_thread_only"} | ({"filter_fn"} if name == "limit_leaks" else set())
            unknown = set(marker.kwargs) - allowed
            if len(marker.args) != 1 or unknown:
                raise ValueError(f"memlens: {name} takes one size and "
                                 f"{', '.join(sorted(allowed))} (got {marker.args!r}, "
                                 f"{sorted(unknown)})")
            size = parse_size(marker.args[0])
            self.current_thread_only |= bool(marker.kwargs.get("current_thread_only", False))
            if name == "limit_memory":
                self.memory = size
            else:
                self.leaks = size
                self.filter_fn = marker.kwargs.get("filter_fn")

    def __bool__(self):
        return self.memory is not None or self.leaks is not None


class Frame:
    """One frame of a stack given to a limit_leaks filter_fn (as pytest-memray's): function,
    filename, lineno, plus module and python (False for a native frame)."""
    __slots__ = ("function", "filename", "lineno", "module", "python")

    def __init__(self, frame):
        self.function = frame["function"]
        self.filename = frame["file"]
        self.lineno = frame["line"]
        self.module = frame["module"]
        self.python = frame["python"]

    def __repr__(self):
        return f"Frame({self.function!r}, {self.filename!r}, {self.lineno})"


class Stack:
    """A leaking stack for filter_fn: .frames innermost first, .size bytes, .n_allocations."""

    def __init__(self, leak):
        self.frames = tuple(Frame(f) for f in leak["stack"])
        self.size = leak["leaked_bytes"]
        self.n_allocations = leak["leaked_blocks"]


def _where(frame):
    if frame["file"]:
        return f"{frame['file']}:{frame['line']} in {frame['function'] or '??'}"
    return f"{frame['function'] or '??'} ({os.path.basename(frame['module'])})"


def _is_runner(frame):
    """A frame of pytest's or pluggy's machinery: a stack is shown up to the first one."""
    return frame["python"] and re.search(r"[/\\](_pytest|pluggy)[/\\]", frame["file"])


def format_stacks(rows, field, blocks_field):
    """The failure text's stacks: each with its bytes, its site first (file:line), then its
    frames innermost first, up to pytest's own."""
    lines = []
    for row in rows:
        lines.append(f"{format_size(row[field])} ({row[field]} B) in {row[blocks_field]} "
                     f"block(s) allocated at {_where(row['site'])}")
        frames = row["stack"]
        shown = next((i for i, f in enumerate(frames) if _is_runner(f)), len(frames))
        shown = min(shown, _STACK_FRAMES)
        for frame in frames[:shown]:
            lines.append(f"    {_where(frame)}")
        if shown < len(frames):
            lines.append(f"    ... {len(frames) - shown} more frames (pytest's)"
                         if _is_runner(frames[shown]) else
                         f"    ... {len(frames) - shown} more frames")
    return "\n".join(lines)


class Result:
    """A recorded test's figures (bytes), as `memlens top --by module` sums them."""

    def __init__(self, nodeid, peak, python_peak, leaked, python_leaked, runtime):
        self.nodeid = nodeid
        self.peak, self.python_peak = peak, python_peak
        self.leaked, self.python_leaked = leaked, python_leaked
        self.runtime = runtime  # blocks set apart as the runtime's or pytest's (not in leaked)


def _sums(cli, capture, extra):
    rows = cli.json_output("top", capture, "--by", "module", "--limit", "1000000", *extra)["rows"]
    return {key: sum(r[key] for r in rows)
            for key in ("peak_bytes", "python_peak_bytes", "leaked_bytes", "python_leaked_bytes")}


def _leaking_stacks(cli, capture, extra):
    """The stacks still holding blocks at the span's end, but the runtime's (the suppressions)
    and pytest's own: a stack whose site (its innermost Python frame, the analyzer's choice) is
    in pytest or pluggy holds the runner's state around the test, freed once the call returns."""
    limit = 200
    while True:
        rows = cli.json_output("top", capture, "--by", "stack", "--sort", "leaked", "--limit",
                               str(limit), *extra, *_excludes())["rows"]
        if len(rows) < limit or not rows[-1]["leaked_bytes"]:
            break
        limit *= 10  # every row leaks: there may be more
    return [r for r in rows if r["leaked_bytes"] and not _is_runner(r["site"])]


def _excludes():
    return [arg for pattern in RUNTIME_SUPPRESSIONS for arg in ("--exclude", pattern)]


class _Plugin:
    def __init__(self, config, enabled):
        self.config = config
        self.enabled = enabled
        self.results = []
        self.directory = None
        self.counter = 0
        self.fail_on_increase = config.getoption("memlens_fail_on_increase")
        self.tolerance = _tolerance(config.getoption("memlens_tolerance"))
        self.baselines = None  # {test id: peak} from pytest's cache, read on first use
        self.updated = {}  # the peaks of this run's passing tests, for the cache
        if self.fail_on_increase and getattr(config, "cache", None) is None:
            raise pytest.UsageError("memlens: --memlens-fail-on-increase keeps its baselines in "
                                    "pytest's cache: do not disable cacheprovider")

    def _capture_path(self, item):
        if self.directory is None:
            kept = self.config.getoption("memlens_dir")
            if kept:
                os.makedirs(kept, exist_ok=True)
                self.directory = os.path.abspath(kept)
            else:
                import tempfile
                self.directory = tempfile.mkdtemp(prefix="memlens-pytest-")
        self.counter += 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[:150]
        return os.path.join(self.directory, f"{self.counter:04d}-{name}.mlens")

    # The innermost wrapper of the call phase: the span holds the test (a function's body, a
    # unittest case's setUp, test and tearDown), not fixtures, nor other plugins' wrappers.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item):
        try:
            limits = _Limits(item)
        except ValueError as error:
            pytest.fail(str(error), pytrace=False)
        if not (self.enabled or limits):
            return (yield)
        import threading
        import memlens
        from memlens import _cli
        path = self._capture_path(item)
        gc.collect()  # garbage from before is freed now, and the free lists are empty
        try:
            tracker = memlens.Tracker(path, native=not self.config.getoption(
                "memlens_no_native")).start()
        except RuntimeError as error:
            pytest.fail(f"memlens: cannot record {item.nodeid}: {error}", pytrace=False)
        thread = threading.get_native_id()
        try:
            result = yield
            passed = True
        except BaseException:
            passed = False
            raise
        finally:
            gc.collect()  # cycles are garbage, not leaks; empties the free lists again
            tracker.stop()
            failure = self._analyse(item, path, limits, thread, passed, _cli)
        if failure:
            pytest.fail(failure, pytrace=False)
        return result

    def _analyse(self, item, capture, limits, thread, passed, cli):
        """Records the test's figures and returns the text of a broken limit, or None."""
        only = ["--thread", str(thread)] if limits.current_thread_only else []
        try:
            whole = _sums(cli, capture, only)
            leaks = _leaking_stacks(cli, capture, only)
            leaked = sum(r["leaked_bytes"] for r in leaks)
            result = Result(item.nodeid, whole["peak_bytes"], whole["python_peak_bytes"],
                            leaked, sum(r["python_leaked_bytes"] for r in leaks),
                            whole["leaked_bytes"] - leaked)
            self.results.append(result)
            if not passed:
                return None  # the test's own failure says more; its traceback holds its frames
            failures = []
            if limits.memory is not None and result.peak > limits.memory:
                rows = cli.json_output("top", capture, "--by", "stack", "--sort", "peak",
                                       "--limit", "5", *only)["rows"]
                failures.append(
                    f"memlens: the test's peak was {format_size(result.peak)} ({result.peak} B), "
                    f"over its limit_memory of {format_size(limits.memory)} "
                    f"({limits.memory} B). In use at the peak, largest first (1% and more):\n"
                    + format_stacks([r for i, r in enumerate(rows) if r["peak_bytes"] and
                                     (i == 0 or r["peak_bytes"] * 100 >= result.peak)],
                                    "peak_bytes", "peak_blocks"))
            if limits.leaks is not None:
                leaks = [r for r in leaks if r["leaked_bytes"] > limits.leaks]
                if limits.filter_fn is not None:
                    leaks = [r for r in leaks if limits.filter_fn(Stack(r))]
                if leaks:
                    failures.append(
                        f"memlens: {len(leaks)} stack(s) leaked more than the limit_leaks of "
                        f"{format_size(limits.leaks)} ({limits.leaks} B) each:\n"
                        + format_stacks(leaks, "leaked_bytes", "leaked_blocks"))
            failures += self._check_increase(result)
            if self.enabled and not failures:
                self.updated[result.nodeid] = result.peak  # the baseline of the next runs
            return "\n".join(failures) or None
        except cli.AnalyzerError as error:
            return f"memlens: cannot analyse the capture {capture}: {error}"
        finally:
            if not self.config.getoption("memlens_dir"):
                for leftover in (capture, capture + ".idx"):
                    if os.path.exists(leftover):
                        os.unlink(leftover)

    def _check_increase(self, result):
        if not self.enabled:
            return []
        if self.baselines is None:
            cache = getattr(self.config, "cache", None)
            self.baselines = dict(cache.get("memlens/peak", {})) if cache else {}
        before = self.baselines.get(result.nodeid)
        if self.fail_on_increase and before is not None:
            fraction, slack = self.tolerance
            allowed = before + max(int(before * fraction), slack)
            if result.peak > allowed:
                return [f"memlens: the test's peak grew from {format_size(before)} ({before} B) "
                        f"to {format_size(result.peak)} ({result.peak} B), beyond the "
                        f"tolerance of {self.config.getoption('memlens_tolerance')} "
                        "(--memlens-fail-on-increase; the baseline is kept until it passes)"]
        return []

    def pytest_sessionfinish(self, session):
        cache = getattr(self.config, "cache", None)
        if cache is not None and self.updated:
            cache.set("memlens/peak", {**self.baselines, **self.updated})
        if self.directory and not self.config.getoption("memlens_dir"):
            import shutil
            shutil.rmtree(self.directory, ignore_errors=True)

    def pytest_terminal_summary(self, terminalreporter):
        most = self.config.getoption("memlens_most")
        if not self.enabled or not self.results or most <= 0:
            return
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "memlens")
        biggest = sorted(self.results, key=lambda r: r.peak, reverse=True)[:most]
        write(f"{len(self.results)} test(s) recorded; the {len(biggest)} with the largest peak "
              "(leaks: blocks the test allocated and still held at its end):")
        write(f"{'peak':>11} {'(Python)':>11} {'leaked':>11} {'(Python)':>11}  test")
        for r in biggest:
            write(f"{format_size(r.peak):>11} {format_size(r.python_peak):>11} "
                  f"{format_size(r.leaked):>11} {format_size(r.python_leaked):>11}  {r.nodeid}")
        leaking = [r for r in self.results if r.leaked]
        runtime = sum(r.runtime for r in self.results)
        write(f"{len(leaking)} test(s) leaked; {format_size(runtime)} kept by the Python runtime "
              "(imports, caches) or pytest left out of the leaks")
        if self.config.getoption("memlens_dir"):
            write(f"captures kept in {self.directory}")
