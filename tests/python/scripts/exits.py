# Exits with the status given on the command line (sys.exit), or raises when asked to.
import sys

if sys.argv[1] == "raise":
    raise RuntimeError("boom from the script")
print("argv:", sys.argv[1:])
sys.exit(int(sys.argv[1]))
