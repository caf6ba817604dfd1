"""memlens.monitor under test (tests/e2e/test_monitor.py): memory grows and shrinks by known
amounts at marked lines, and after each step the program waits until the monitor thread has
checked twice, so which step makes a task fire is fixed.

    python monitor_growth.py OUT_DIR    (PYTHONPATH=src/python, MEMLENS_BUILD_DIR=build)

STEP-byte bytes objects (filled: their pages are touched) are kept at @grow, three dropped at
the end. A TakeSnapshotTask and a DisplayTopTask, both with a 1,000,000-byte threshold, write
OUT_DIR/snap-{pid}-{counter:04}.pickle and OUT_DIR/top.txt. Then a plain Task with a delay and
repeat=2. Prints one JSON line: what the program saw after each step, to compare with the
files.
"""
import gc
import json
import os
import sys
import threading
import time

import memlens.tracemalloc as tracemalloc
from memlens import monitor

STEP = 400_000
THRESHOLD = 1_000_000


def wait_for_checks(count=2):
    seen = monitor._scheduler.checks
    deadline = time.monotonic() + 120
    while monitor._scheduler.checks < seen + count:
        if time.monotonic() > deadline:
            sys.exit("the monitor thread did not check the tasks within 120 s")
        time.sleep(0.005)


def statm():
    with open("/proc/self/statm") as f:
        vms, rss = (int(x) * os.sysconf("SC_PAGE_SIZE") for x in f.read().split()[:2])
    return {"rss": rss, "vms": vms}


def main(out_dir):
    untraced = {name: metric.value for name, metric in monitor.collect_metrics().items()}
    tracemalloc.start()
    snapshots = monitor.TakeSnapshotTask(os.path.join(out_dir, "snap-{pid}-{counter:04}.pickle"))
    snapshots.set_memory_threshold(THRESHOLD)
    snapshots.schedule()
    with open(os.path.join(out_dir, "top.txt"), "w") as top_file:
        top = monitor.DisplayTopTask(count=3, file=top_file)
        top.set_memory_threshold(THRESHOLD)
        top.schedule()
        kept, after = [], []
        for _ in range(6):
            block = b"x" * STEP  # @grow
            kept.append(block)
            del block
            wait_for_checks()
            after.append({"files": snapshots.counter, "displays": top.calls, **statm(),
                          "gc_objects": len(gc.get_objects())})
        del kept[3:]  # 1.2 MB less
        wait_for_checks()
        after.append({"files": snapshots.counter, "displays": top.calls, **statm(),
                      "gc_objects": len(gc.get_objects())})
        monitor.cancel_tasks()
    threads_after_cancel = [t.name for t in threading.enumerate()]

    ticks = []
    ticker = monitor.Task(ticks.append, "tick")
    ticker.set_delay(0.2)
    ticker.schedule(repeat=2)
    deadline = time.monotonic() + 120
    while ticker.is_scheduled() and time.monotonic() < deadline:
        time.sleep(0.01)
    scheduled_after_repeats = ticker.is_scheduled()

    # Left scheduled on purpose: the thread must be stopped at exit, not hang it.
    last = monitor.TakeSnapshotTask(os.path.join(out_dir, "never-{counter}.pickle"))
    last.set_delay(3600)
    last.schedule()
    print(json.dumps({"pid": os.getpid(), "after": after, "untraced": untraced,
                      "threads_after_cancel": threads_after_cancel, "ticks": ticks,
                      "scheduled_after_repeats": scheduled_after_repeats,
                      "tasks": len(monitor.get_tasks())}))


if __name__ == "__main__":
    main(sys.argv[1])
