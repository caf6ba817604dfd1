# A module-level list grows to a known size and the program never frees it: the interpreter's
# shutdown does, after the program's own code ended. argv[1] says how the code ends:
#   return  the module's code runs to its end
#   exit    sys.exit(3) from inside a function
#   raise   an uncaught exception from inside a function
#   atexit  returns, and an atexit handler then mallocs 1,000,000 bytes it never frees
#   fork    a forked child grows the list further and runs to sys.exit; the parent, once the
#           child is done, grows it again and returns
#   os_exit os._exit(0): no shutdown, no end of the program's code
# Prints the size of one item and of the list's own array of pointers, once the list is full.
import os
import sys

ITEMS = 1000
kept = []


def grow(count):
    for _ in range(count):
        kept.append(bytes(10_000))  # @append


def grow_in_child(count):
    for _ in range(count):
        kept.append(bytes(10_000))  # @child


def grow_after_fork(count):
    for _ in range(count):
        kept.append(bytes(10_000))  # @after_fork


def leave_with_exit():
    sys.exit(3)


def leave_with_exception():
    raise RuntimeError("the program's own error")


def keep_a_native_block():
    import ctypes
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.malloc(1_000_000)  # @atexit_malloc


how = sys.argv[1]
if how == "atexit":
    import atexit
    import ctypes  # imported now: the handler's own allocations are then only its malloc
    atexit.register(keep_a_native_block)
grow(ITEMS)
if how == "fork":
    sys.stdout.flush()
    child = os.fork()
    if child == 0:
        grow_in_child(ITEMS)
        sys.exit(0)
    os.waitpid(child, 0)
    grow_after_fork(ITEMS)
print(sys.getsizeof(bytes(10_000)), sys.getsizeof(kept) - sys.getsizeof([]), flush=True)
if how == "exit":
    leave_with_exit()
if how == "raise":
    leave_with_exception()
if how == "os_exit":
    os._exit(0)
