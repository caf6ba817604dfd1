blob = bytearray(123_456)  # @first
# The allocation above is the script's first: Python-domain events seen there show that memlens's
# allocator wrappers were still in place when initialization (Py_Initialize) ended.
import os  # noqa: E402

os._exit(0)  # the blob stays in use at exit
