"""py_numpy: a numpy-heavy workload (bench/suite.py).

Repeatedly creates medium and large float64 arrays (1e5..1e6 elements), does arithmetic that
creates temporaries, slices, concatenates, and loops over chunks in Python. Deterministic
(numpy's seeded PCG64). Usage: python3 py_numpy.py [SCALE]   (1.0 benchmark size, 0.1 quick)
Prints `steps=N checksum=X` to stdout at exit.
"""
import sys

import numpy as np


def step(rng, n):
    a = rng.standard_normal(n)
    b = np.arange(n, dtype=np.float64) * 1e-6
    c = a * 2.0 + b ** 2 - np.sqrt(np.abs(a))  # several temporaries
    parts = [c[i:i + n // 8] * (i + 1) for i in range(0, n, n // 8)]  # chunks, each a copy
    d = np.concatenate(parts)
    acc = 0.0
    for chunk in np.array_split(d, 64):  # a Python-level loop over views
        acc += float(chunk.mean()) + float((chunk > 0).sum())
    e = np.sort(d[::3])
    return acc + float(e[len(e) // 2])


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    rng, checksum, steps = np.random.default_rng(2024), 0.0, max(1, int(36 * scale))
    sizes = [100_000, 300_000, 1_000_000]
    for s in range(steps):
        checksum += step(rng, sizes[s % 3])
    print(f"steps={steps} checksum={checksum:.6f}")


if __name__ == "__main__":
    main()
