# A function that appends to a global list on every call: the growth is at the append line.
import os
import sys

history = []


def remember(i):
    history.append(bytearray(100))  # @append


for i in range(10_000):
    remember(i)
print(sys.getsizeof(bytearray(100)), sys.getsizeof(history) - sys.getsizeof([]), flush=True)
os._exit(0)
