"""A Python program that talks to memlens: a pool of Particle objects reported as a named heap
("particles", typed), a scratch heap rewound at once, a marker per frame, a region around each
update, and a snapshot request. Without memlens every call is a no-op.

    PYTHONPATH=src/python build/bin/memlens run -- python3 examples/python_heaps.py
    memlens top CAPTURE@snapshot:after-frames --heap particles --by line

tests/e2e/test_api.py checks its figures exactly.
"""
import memlens

PARTICLE_BYTES = 48  # what each particle stands for in the heap's figures


class Particle:
    __slots__ = ("x", "y")


class ParticlePool:
    def __init__(self, capacity):
        self.heap = memlens.Heap("particles")
        self.spare = [Particle() for _ in range(capacity)]

    def take(self):
        particle = self.spare.pop()
        self.heap.alloc(id(particle), PARTICLE_BYTES, type="Particle")  # @take
        return particle

    def give_back(self, particle):
        self.heap.free(id(particle))
        self.spare.append(particle)


def main():
    pool = ParticlePool(100)
    live = []
    for frame in range(5):
        memlens.marker("frame")
        with memlens.region("update"):
            for _ in range(10):
                live.append(pool.take())
            for _ in range(4):
                pool.give_back(live.pop())
    memlens.snapshot("after-frames")  # 30 particles in use
    with memlens.Heap("scratch") as scratch:
        scratch.alloc(0x10000, 4096)  # @scratch
        scratch.alloc(0x20000, 1024)
        scratch.reset()
    print("done", len(live), memlens.is_recording())


if __name__ == "__main__":
    main()
