"""Watching memory while the program runs (PEP 454's tasks, which the standard library dropped):
take a snapshot when traced memory grows or shrinks by a threshold or every N seconds, write it
to a file named from a template with metrics recorded beside it, or print the top lines compared
with the previous snapshot. Built on memlens.tracemalloc (its take_snapshot, get_traced_memory
and Snapshot), so snapshots hold Python's allocations and native memory in its own domain.

    import memlens.tracemalloc as tracemalloc
    from memlens import monitor

    tracemalloc.start()
    task = monitor.TakeSnapshotTask("snap-{pid}-{counter:04}.pickle")
    task.set_memory_threshold(10 * 2**20)     # each time traced memory moved by 10 MiB
    task.schedule()
    top = monitor.DisplayTopTask(count=5)     # to sys.stderr by default
    top.set_delay(30)                         # every 30 s
    top.schedule()
    ...
    snapshot = monitor.load_snapshot("snap-1234-0001.pickle")
    snapshot.metrics["process.rss"].value

One thread ("memlens-monitor") checks the scheduled tasks every POLL_INTERVAL seconds, or
nine times as long as its last check of the traced memory took (memlens answers it from the
span's capture: docs/tracemalloc.md), and calls those that are due. It runs while a task is
scheduled, and is stopped (joined) at interpreter exit, when memlens.tracemalloc stops tracing
(every task is cancelled then, as PEP 454's disable() did), and in a forked child (which
starts with no task). docs/monitor.md has the
details: the template's fields, every metric, the display's format.
"""
import atexit
import collections
import ctypes
import datetime
import gc
import os
import sys
import threading
import time
import traceback

__all__ = ["Metric", "collect_metrics", "Task", "TakeSnapshotTask", "DisplayTopTask",
           "display_top", "load_snapshot", "get_tasks", "cancel_tasks", "POLL_INTERVAL",
           "DEFAULT_TEMPLATE"]

POLL_INTERVAL = 0.05  # seconds between two checks of the scheduled tasks, at least
DEFAULT_TEMPLATE = "memlens-{program}-{pid}-{counter:04}.pickle"


def _tracemalloc():
    """memlens.tracemalloc, imported at first use (it loads the agent)."""
    import memlens.tracemalloc
    return memlens.tracemalloc


# --- metrics -----------------------------------------------------------------------------------

Metric = collections.namedtuple("Metric", "name value format")
Metric.__doc__ = ("A figure read when a snapshot was taken: format 'size' (bytes), 'int' (a "
                  "count) or 'percent' (1.0 is 100%).")


def _process_metrics():
    """Resident and virtual size from /proc/self/statm (in pages)."""
    with open("/proc/self/statm") as statm:
        vms, rss = (int(field) for field in statm.read().split()[:2])
    page = os.sysconf("SC_PAGE_SIZE")
    return [Metric("process.rss", rss * page, "size"), Metric("process.vms", vms * page, "size")]


class _Native:
    """The C functions the metrics call, looked up once (a lookup allocates: it would show in
    the top display as the monitor's own memory)."""

    def __init__(self):
        libc = ctypes.CDLL(None)
        self.open_memstream, self.fclose, self.free = libc.open_memstream, libc.fclose, libc.free
        self.open_memstream.restype = ctypes.c_void_p
        self.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.POINTER(ctypes.c_size_t)]
        self.fclose.argtypes, self.free.argtypes = [ctypes.c_void_p], [ctypes.c_void_p]
        # PyDLL: called with the GIL held, which it needs.
        self.malloc_stats = getattr(ctypes.pythonapi, "_PyObject_DebugMallocStats", None)
        if self.malloc_stats is not None:
            self.malloc_stats.argtypes = [ctypes.c_void_p]
            self.malloc_stats.restype = ctypes.c_int
        self.agent_memory = None  # memlens_get_agent_memory, once the agent is loaded

    def agent(self):
        if self.agent_memory is None:
            self.agent_memory = _agent_function("memlens_get_agent_memory")
            if self.agent_memory is not None:
                self.agent_memory.argtypes, self.agent_memory.restype = [], ctypes.c_size_t
        return self.agent_memory


_native = None


def _c():
    global _native
    if _native is None:
        _native = _Native()
    return _native


def _malloc_stats_text():
    """What CPython's _PyObject_DebugMallocStats writes about its small-object allocator
    (pymalloc or mimalloc), captured in memory (never to the program's stderr); None when it
    writes nothing: CPython reports its allocator only while it is the one installed, not while
    a hook (memlens's, tracemalloc's) stands in front of it."""
    c = _c()
    if c.malloc_stats is None:
        return None
    buffer, size = ctypes.c_void_p(), ctypes.c_size_t()
    stream = c.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
    if not stream:
        return None
    used = c.malloc_stats(stream)
    c.fclose(stream)  # sets buffer and size
    text = ctypes.string_at(buffer, size.value).decode("ascii", "replace") if buffer else ""
    c.free(buffer)
    return text if used else None


def _figures(text):
    """'# bytes in allocated blocks = 3,640,336' lines -> {label: int}; the first of each."""
    figures = {}
    for line in text.splitlines():
        label, sep, value = line.rpartition("=")
        value = value.strip().replace(",", "")
        if sep and value.isdigit():
            figures.setdefault(" ".join(label.strip("# ").split()), int(value))
    return figures


def _allocator_metrics():
    """pymalloc's arenas, or mimalloc's heaps, as _PyObject_DebugMallocStats reports them."""
    metrics = [Metric("allocator.blocks", sys.getallocatedblocks(), "int")]
    text = _malloc_stats_text()
    if not text:
        return metrics
    figures = _figures(text)
    if "arenas allocated current" in figures:  # pymalloc
        arena = next(value for label, value in figures.items() if "bytes/arena" in label)
        allocated = figures["bytes in allocated blocks"]
        metrics += [Metric("pymalloc.arenas", figures["arenas allocated current"], "int"),
                    Metric("pymalloc.size", arena, "size"),
                    Metric("pymalloc.allocated", allocated, "size"),
                    Metric("pymalloc.free", arena - allocated, "size"),
                    Metric("pymalloc.fragmentation", (arena - allocated) / arena if arena else 0.0,
                           "percent")]
    elif figures.get("Bytes Reserved"):  # mimalloc (free-threaded builds report zeros: omitted)
        metrics += [Metric("mimalloc.allocated", figures["Allocated Bytes"], "size"),
                    Metric("mimalloc.committed", figures["Bytes Committed"], "size"),
                    Metric("mimalloc.reserved", figures["Bytes Reserved"], "size")]
    return metrics


def _agent_function(name):
    """name in the memlens agent loaded into this process, or None: in the global scope when it
    is preloaded, else through the path of the libmemlens.so mapped here (memlens.Tracker
    dlopens it RTLD_LOCAL)."""
    with open("/proc/self/maps") as maps:
        paths = {line.split(None, 5)[-1].strip() for line in maps if "libmemlens.so" in line}
    if not paths:
        return None
    try:
        return getattr(ctypes.CDLL(None), name)
    except AttributeError:
        pass
    for path in sorted(paths):
        try:
            return getattr(ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY), name)
        except (OSError, AttributeError):
            continue
    return None


def collect_metrics():
    """The metrics of this moment, {name: Metric}: process.rss, process.vms, allocator.blocks,
    pymalloc.* or mimalloc.* (when CPython reports them), gc.objects, tracemalloc.traced, .peak
    and memlens.capture while memlens.tracemalloc traces, memlens.agent_memory when the agent is
    loaded (docs/monitor.md says what each is)."""
    metrics = _process_metrics() + _allocator_metrics()
    metrics.append(Metric("gc.objects", len(gc.get_objects()), "int"))
    tracemalloc = _tracemalloc()
    if tracemalloc.is_tracing():
        traced, peak = tracemalloc.get_traced_memory()
        metrics += [Metric("tracemalloc.traced", traced, "size"),
                    Metric("tracemalloc.peak", peak, "size"),
                    Metric("memlens.capture", tracemalloc.get_tracemalloc_memory(), "size")]
    agent = _c().agent()
    if agent is not None:
        metrics.append(Metric("memlens.agent_memory", agent(), "size"))
    return {metric.name: metric for metric in metrics}


def _format_metric(metric):
    if metric.format == "size":
        return f"{metric.name}={_format_size(metric.value)}"
    if metric.format == "percent":
        return f"{metric.name}={metric.value * 100:.1f}%"
    return f"{metric.name}={metric.value}"


def _format_size(size, sign=False):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 10 * 1024 or unit == "GiB":
            return f"{size:+.0f} {unit}" if sign else f"{size:.0f} {unit}"
        size /= 1024
    return None  # not reached


def _snapshot(metrics, callback):
    """A snapshot of memlens.tracemalloc with .metrics (a dict of Metric, empty if not asked)
    and .timestamp; then callback(snapshot), which may add metrics."""
    snapshot = _tracemalloc().take_snapshot()
    snapshot.timestamp = datetime.datetime.now()
    snapshot.metrics = collect_metrics() if metrics else {}
    if callback is not None:
        callback(snapshot)
    return snapshot


def load_snapshot(filename):
    """A snapshot written by TakeSnapshotTask, with its .metrics and .timestamp."""
    return _tracemalloc().Snapshot.load(filename)


# --- tasks ------------------------------------------------------------------------------------

class Task:
    """Calls func(*args, **kwargs) on the monitor thread, when scheduled, each time traced memory
    (memlens.tracemalloc.get_traced_memory()[0]) has grown or shrunk by at least the memory
    threshold since the last call (or since schedule()), and each time the delay has passed
    since then. Either may be None; a scheduled task needs one of them. Exceptions from func
    cancel the task (its traceback goes to stderr, and .error keeps it)."""

    def __init__(self, func, *args, **kwargs):
        self.func, self.func_args, self.func_kwargs = func, args, kwargs
        self._threshold = self._delay = None
        self._repeat = None  # calls left; None: until cancelled
        self._reference = self._deadline = None
        self.calls = 0
        self.error = None

    def call(self):
        """Calls func now (whether scheduled or not) and returns what it returns."""
        return self.func(*self.func_args, **self.func_kwargs)

    def get_memory_threshold(self):
        return self._threshold

    def set_memory_threshold(self, size):
        """Bytes (> 0) or None; reschedules the task if it is scheduled."""
        if size is not None and size <= 0:
            raise ValueError(f"the memory threshold must be positive, not {size!r}")
        self._threshold = size
        self._reschedule()

    def get_delay(self):
        return self._delay

    def set_delay(self, seconds):
        """Seconds (> 0) or None; reschedules the task if it is scheduled."""
        if seconds is not None and seconds <= 0:
            raise ValueError(f"the delay must be positive, not {seconds!r}")
        self._delay = seconds
        self._reschedule()

    def is_scheduled(self):
        return self in _scheduler.tasks

    def schedule(self, repeat=None):
        """Schedules the task for `repeat` calls (None: until cancelled); a second call
        reschedules it. memlens.tracemalloc must be tracing."""
        if self._threshold is None and self._delay is None:
            raise ValueError("a task needs a memory threshold or a delay: call "
                             "set_memory_threshold() or set_delay() first")
        if repeat is not None and repeat < 1:
            raise ValueError(f"repeat must be at least 1, not {repeat!r}")
        if not _tracemalloc().is_tracing():
            raise RuntimeError("memlens.tracemalloc is not tracing: call "
                               "memlens.tracemalloc.start() before scheduling a task")
        self._repeat = repeat
        self._arm()
        _scheduler.add(self)

    def cancel(self):
        """Unschedules the task (nothing happens if it is not scheduled)."""
        _scheduler.remove(self)

    def _reschedule(self):
        if self.is_scheduled():
            self._arm()

    def _arm(self):
        """Counts the threshold and the delay from now."""
        self._reference = _tracemalloc().get_traced_memory()[0]
        self._deadline = time.monotonic() + self._delay if self._delay is not None else None

    def _due(self, traced, now):
        if self._threshold is not None and abs(traced - self._reference) >= self._threshold:
            return True
        return self._deadline is not None and now >= self._deadline

    def _run(self):
        """Called by the monitor thread when due; returns False when the task is done. The
        threshold and the delay count again from the end of the call, so the memory of the
        snapshot it took and dropped is not a change."""
        try:
            self.call()
        except Exception:  # noqa: BLE001 (any error of the user's function ends the task)
            self.error = sys.exc_info()[1]
            sys.stderr.write(f"memlens.monitor: {self!r} cancelled after an error:\n")
            traceback.print_exc()
            return False
        self.calls += 1
        self._arm()
        if self._repeat is not None:
            self._repeat -= 1
            return self._repeat > 0
        return True

    def __repr__(self):
        return (f"<{type(self).__name__} threshold={self._threshold} delay={self._delay} "
                f"calls={self.calls}>")


class TakeSnapshotTask(Task):
    """Takes a snapshot of memlens.tracemalloc and writes it (Snapshot.dump) to a file named from
    filename_template, a str.format template with the fields {pid}, {counter} (1 for the
    first file, then 2, 3...), {program} (the program's name, as %e in memlens's captures) and
    {timestamp} (YYYYmmdd-HHMMSS). With metrics=True the snapshot carries collect_metrics()
    as .metrics; callback(snapshot) runs before the write (to add metrics)."""

    def __init__(self, filename_template=DEFAULT_TEMPLATE, metrics=True, callback=None):
        super().__init__(self.take_snapshot)
        self.filename_template = filename_template
        self.metrics, self.callback = metrics, callback
        self.counter = 0
        try:  # a bad template fails here, not on the monitor thread
            self.filename(1)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"filename template {filename_template!r}: {error!s} is not one of "
                             "its fields {pid}, {counter}, {program}, {timestamp}") from None

    def filename(self, counter):
        return self.filename_template.format(
            pid=os.getpid(), counter=counter, program=_program_name(),
            timestamp=datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))

    def take_snapshot(self):
        """Takes and writes a snapshot now; returns (snapshot, filename)."""
        snapshot = _snapshot(self.metrics, self.callback)
        self.counter += 1
        filename = self.filename(self.counter)
        snapshot.dump(filename)
        return snapshot, filename


class DisplayTopTask(Task):
    """Takes a snapshot and writes the `count` lines (key_type "lineno", "filename" or
    "traceback"; cumulative as in Snapshot.statistics) whose memory changed most since the
    previous snapshot (or the first one, with compare_to_previous=False) to `file`
    (sys.stderr when None, so the program's own output stays its own), with metrics."""

    def __init__(self, count=10, key_type="lineno", cumulative=False, file=None, *,
                 compare_to_previous=True, metrics=True, callback=None):
        super().__init__(self.display)
        self.count, self.key_type, self.cumulative, self.file = count, key_type, cumulative, file
        self.compare_to_previous, self.metrics, self.callback = compare_to_previous, metrics, \
            callback
        self.previous = None

    def display(self):
        """Takes a snapshot and displays the top now; returns the snapshot."""
        snapshot = _snapshot(self.metrics, self.callback)
        display_top(snapshot, self.previous, self.count, self.key_type, self.cumulative,
                    self.file)
        if self.previous is None or self.compare_to_previous:
            self.previous = snapshot
        return snapshot


def display_top(snapshot, previous=None, count=10, key_type="lineno", cumulative=False,
                file=None):
    """Writes the top of snapshot to file (sys.stderr when None): the `count` entries that
    changed most since `previous` (all of snapshot's when None), then the metrics."""
    file = sys.stderr if file is None else file
    when = getattr(snapshot, "timestamp", None) or datetime.datetime.now()
    if previous is None:
        stats = snapshot.statistics(key_type, cumulative)
        what = f"biggest {key_type} entries"
        rows = [f"{s.traceback}: size={_format_size(s.size)}, count={s.count}" for s in stats]
    else:
        stats = snapshot.compare_to(previous, key_type, cumulative)
        since = getattr(previous, "timestamp", None)
        what = f"{key_type} entries that changed most since " + (
            f"{since:%H:%M:%S}" if since else "the previous snapshot")
        rows = [f"{s.traceback}: size={_format_size(s.size)} ({_format_size(s.size_diff, True)})"
                f", count={s.count} ({s.count_diff:+d})" for s in stats]
    total = sum(trace.size for trace in snapshot.traces)
    lines = [f"memlens top at {when:%H:%M:%S}: {total} bytes traced in {len(snapshot.traces)} "
             f"blocks; the {min(count, len(rows))} {what}:"]
    lines += [f"#{rank}: {row}" for rank, row in enumerate(rows[:count], 1)]
    if len(rows) > count:
        lines.append(f"{len(rows) - count} other entries")
    metrics = getattr(snapshot, "metrics", None)
    if metrics:
        lines.append("metrics: " + ", ".join(_format_metric(m) for m in metrics.values()))
    file.write("\n".join(lines) + "\n\n")
    file.flush()


def _program_name():
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"


# --- the monitor thread ------------------------------------------------------------------------

class _Scheduler:
    """The scheduled tasks and the thread that calls them; every method is thread-safe. The
    thread ends when no task is left (add starts a new one) or when stop() sets its event."""

    def __init__(self):
        self.tasks = []
        self.lock = threading.Lock()
        self.thread = self.stopping = None
        self.checks = 0  # rounds of checks done (the tests wait on it)
        self.registered = False

    def add(self, task):
        if not self.registered:
            # Registered now, after memlens.tracemalloc's own (it traces by now), so that at exit
            # this thread is joined before tracing stops under a task it is running.
            atexit.register(self.stop)
            self.registered = True
        with self.lock:
            if task not in self.tasks:
                self.tasks.append(task)
            if self.thread is None:
                self.stopping = threading.Event()
                self.thread = threading.Thread(target=self.loop, args=(self.stopping,),
                                               name="memlens-monitor", daemon=True)
                self.thread.start()

    def remove(self, task):
        with self.lock:
            if task in self.tasks:
                self.tasks.remove(task)

    def scheduled(self):
        with self.lock:
            return list(self.tasks)

    def stop(self):
        """Cancels every task and joins the thread (unless called from it)."""
        with self.lock:
            self.tasks.clear()
            thread, self.thread = self.thread, None
            if self.stopping is not None:
                self.stopping.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def loop(self, stopping):
        wait = POLL_INTERVAL
        while not stopping.wait(wait):
            with self.lock:
                if not self.tasks:
                    self.thread = None
                    return
                tasks = list(self.tasks)
            tracemalloc = _tracemalloc()
            if not tracemalloc.is_tracing():  # stopped: as PEP 454's disable(), cancel all
                with self.lock:
                    self.tasks.clear()
                continue
            began = time.monotonic()
            traced = tracemalloc.get_traced_memory()[0]
            now = time.monotonic()
            # memlens answers get_traced_memory from the span's capture (flush, then the
            # analyzer): waiting 9 times as long as it took keeps the checks under a tenth of
            # a core however long the span grows.
            wait = max(POLL_INTERVAL, 9 * (now - began))
            for task in tasks:
                if task.is_scheduled() and task._due(traced, now) and not task._run():
                    self.remove(task)
            self.checks += 1

    def forget_after_fork(self):
        self.__init__()


_scheduler = _Scheduler()
os.register_at_fork(after_in_child=_scheduler.forget_after_fork)


def get_tasks():
    """The scheduled tasks."""
    return _scheduler.scheduled()


def cancel_tasks():
    """Cancels every scheduled task and stops the monitor thread."""
    _scheduler.stop()
