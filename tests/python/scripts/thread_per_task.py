"""Starts 2000 threads one after another, as a server that runs each request on a thread of its
own (http.server's ThreadingHTTPServer, socketserver.ThreadingMixIn): each allocates a known
buffer at a known line and ends. Prints how much the process's address space grew from the
100th thread to the last, in KiB: under memlens every exited thread must leave nothing behind
(its ring and the Python hooks' cache of its frames go to the next thread)."""
import threading
import time

THREADS = 2000
kept = [None] * THREADS  # made in full first: no growth of the list at the task's line


def vm_size_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))


def task(i):
    kept[i] = bytearray(10_000)  # @task


after_warmup = 0
for i in range(THREADS):
    thread = threading.Thread(target=task, args=(i,))
    thread.start()
    thread.join()
    time.sleep(0.001)
    if i == 99:
        after_warmup = vm_size_kib()
print(vm_size_kib() - after_warmup)
