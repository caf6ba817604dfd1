# An 80,000,000-byte numpy array created at a known line, kept to the end.
import os

import numpy as np

array = np.ones(10_000_000)  # @numpy
print(array.nbytes, flush=True)
os._exit(0)
