"""Runs a Python script as __main__ (`python peak_rss.py SCRIPT ARGS...`) and prints, at exit,
this process's own peak resident memory to stderr as `vmhwm_kib=N`: the Python workloads' way to
give bench/suite.py the target's own peak (VmHWM of /proc/self/status), as the native workloads
print it themselves (peak_rss.h). Under `memlens run` that is the profiled program with the
agent in it, not `memlens run`'s own process, which /usr/bin/time's figure may be."""
import atexit
import runpy
import sys


def report():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                print(f"vmhwm_kib={line.split()[1]}", file=sys.stderr, flush=True)


atexit.register(report)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
