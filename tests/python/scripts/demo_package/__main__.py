# `python3 -m demo_package`: a module run as a program.
import os
import sys

data = None  # the module's globals grow here (by 400 bytes in 3.14), not at the marked line
data = bytearray(4_000_000)  # @package
print("package", sys.argv[1:], flush=True)
os._exit(0)
