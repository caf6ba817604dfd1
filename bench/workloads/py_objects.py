"""py_objects: a pure-Python, pymalloc-heavy "records" pipeline (bench/suite.py).

Builds and drops many small objects: a class instance per record, dicts of lists of tuples,
strings from formatting, small ints. Deterministic (fixed-seed LCG, no `random`).
Usage: python3 py_objects.py [SCALE]   (SCALE 1.0 is the benchmark size; --quick uses 0.1)
Prints `records=N groups=N checksum=N` to stdout at exit.
"""
import sys


class Record:
    __slots__ = ("rid", "name", "city", "tags", "scores")

    def __init__(self, rid, name, city, tags, scores):
        self.rid, self.name, self.city, self.tags, self.scores = rid, name, city, tags, scores


CITIES = ["Oslo", "Lima", "Pune", "Kiev", "Rome", "Nice", "Bern", "Baku"]


def lcg(seed):
    while True:
        seed = (seed * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        yield seed >> 33


def make_batch(rng, start, n):
    batch = []
    for i in range(start, start + n):
        r = next(rng)
        tags = [f"t{(r >> k) & 31}" for k in range(0, 12, 4)]
        scores = [((r >> k) & 255, k) for k in range(0, 24, 6)]
        batch.append(Record(i, f"user-{i:07d}-{r % 997}", CITIES[r % 8], tags, scores))
    return batch


def process(batch):
    groups = {}
    for rec in batch:
        row = {"id": rec.rid, "name": rec.name.upper(), "tags": ",".join(rec.tags),
               "total": sum(s for s, _ in rec.scores)}
        groups.setdefault(rec.city, []).append((row["id"], row["total"], row["name"][:9]))
    summary = {city: (len(rows), sum(t for _, t, _ in rows), sorted(rows)[:3])
               for city, rows in groups.items()}
    return summary, sum(len(v) for v in groups.values())


def main():
    scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    batches, size = max(1, int(90 * scale)), 2000
    rng, checksum, records, kept = lcg(12345), 0, 0, []
    for b in range(batches):
        summary, n = process(make_batch(rng, b * size, size))
        records += n
        checksum = (checksum * 31 + sum(c + t for c, t, _ in summary.values())) % (1 << 61)
        kept.append(summary)  # a little retained state, dropped every 8 batches
        if len(kept) == 8:
            kept.clear()
    print(f"records={records} groups={len(CITIES)} checksum={checksum}")


if __name__ == "__main__":
    main()
