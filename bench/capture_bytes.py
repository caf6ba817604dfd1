#!/usr/bin/env python3
"""Where a capture's bytes go: its size by record type and event column (stdlib + libzstd).

A development tool for the capture format (docs/capture-format.md). It reads a capture chunk by
chunk, splits each payload into parts (each metadata record type; the kEvents record's batch
list and each of its columns), compresses each part of each chunk on its own with zstd level 1
(what the writer uses) and prints, per part, the raw bytes, the compressed bytes and those
per event. Compressing the parts apart costs a little more than the whole chunk does (each
part loses what it shares with the others and pays a frame of its own): the `stored` line is
what the file really holds.

    python3 bench/capture_bytes.py CAPTURE [--events N]

--events divides by N instead of the events found in the capture (the benchmark divides by
allocations + frees of the workload). Also printed: how many releases were back-references,
and stack-node statistics (how often a node's parent is the node just before it).
"""
import argparse
import collections
import ctypes
import ctypes.util
import struct
import sys

ZSTD = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
ZSTD.ZSTD_compressBound.restype = ctypes.c_size_t
ZSTD.ZSTD_compress.restype = ctypes.c_size_t
ZSTD.ZSTD_decompress.restype = ctypes.c_size_t
ZSTD.ZSTD_isError.restype = ctypes.c_uint

RECORD_NAMES = {1: "process", 2: "module", 3: "module unload", 4: "thread", 5: "stack node",
                6: "events", 7: "time", 8: "end", 9: "drops", 10: "python code", 11: "resident",
                12: "string", 13: "events", 16: "sampling"}
# The columns of a kEventColumns record (9.0); 8.x's kEvents lacks the neighbours column.
COLUMNS = ["kinds", "seqs", "releases", "reuses", "neighbours", "addresses", "sizes", "stacks"]


def zstd_compress(data, level=1):
    if not data:
        return 0
    bound = ZSTD.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(bound)
    n = ZSTD.ZSTD_compress(out, bound, data, len(data), level)
    if ZSTD.ZSTD_isError(n):
        raise RuntimeError("zstd compression failed")
    return min(n, len(data))


def zstd_decompress(data, raw_size):
    out = ctypes.create_string_buffer(raw_size)
    n = ZSTD.ZSTD_decompress(out, raw_size, data, len(data))
    if ZSTD.ZSTD_isError(n) or n != raw_size:
        raise RuntimeError("corrupt zstd chunk")
    return out.raw


class Cursor:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def varint(self):
        value = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def skip_string(self):
        n = self.varint()
        self.pos += n


def read_chunks(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"MLENSCAP":
        sys.exit(f"{path}: not a memlens capture")
    pos = 16
    while pos + 20 <= len(data):
        magic, stored, raw, codec = struct.unpack_from("<IIIB", data, pos)
        if magic != 0x4B434C4D or pos + 20 + stored > len(data):
            break
        body = data[pos + 20:pos + 20 + stored]
        yield 20 + stored, (zstd_decompress(body, raw) if codec == 1 else body)
        pos += 20 + stored


def split_payload(payload, parts, stats):
    """Adds each record's bytes to parts[name] (a bytearray per part of this chunk)."""
    c = Cursor(payload)
    while c.pos < len(payload):
        start = c.pos
        rtype = payload[c.pos]
        c.pos += 1
        if rtype in (6, 13):
            batches = c.varint()
            for _ in range(batches):
                c.varint()
                c.varint()
            parts["events: batch list"] += payload[start:c.pos]
            columns = {}
            for name in COLUMNS:
                if name == "neighbours" and rtype == 6:
                    continue
                n = c.varint()
                columns[name] = payload[c.pos:c.pos + n]
                parts["events: " + name] += payload[c.pos:c.pos + n]
                c.pos += n
            stats["events"] += len(columns["kinds"])
            rel = Cursor(columns["releases"])
            while rel.pos < len(columns["releases"]):
                stats["releases"] += 1
                if rel.varint() == 0:
                    stats["releases by address"] += 1
            continue
        if rtype == 1:
            stats["images"] += 1
            stats["stack nodes"] = 0  # node ids start over in each program image
            for _ in range(4):
                c.varint()
            c.skip_string()
            for _ in range(c.varint()):
                c.skip_string()
            c.skip_string()
        elif rtype == 2:
            c.varint()
            c.varint()
            c.skip_string()
            c.skip_string()
            for _ in range(2 * c.varint()):
                c.varint()
        elif rtype in (3, 9, 16):
            c.varint()
        elif rtype in (4, 7, 11):
            c.varint()
            c.varint()
        elif rtype == 5:
            stats["stack nodes"] += 1
            stats["stack nodes (all images)"] += 1
            parent_gap = c.varint()  # node id - 1 - parent (format 4)
            ip = c.varint()
            if parent_gap == 0:
                stats["nodes whose parent is the previous node"] += 1
            if ip >> 63:
                stats["python frame nodes"] += 1
        elif rtype == 8:
            c.pos += 1
            for _ in range(5):  # monotonic_ns, events, dropped, detail, unrecorded_children
                c.varint()
        elif rtype == 10:
            c.varint()
            c.skip_string()
            c.skip_string()
            c.varint()
        elif rtype == 12:
            c.varint()
            c.skip_string()
        else:
            sys.exit(f"unknown record type {rtype}")
        parts[RECORD_NAMES[rtype]] += payload[start:c.pos]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("capture")
    ap.add_argument("--events", type=int, help="divide by this many events")
    ap.add_argument("--level", type=int, default=1, help="zstd level for the parts (default 1)")
    args = ap.parse_args()
    raw = collections.Counter()
    packed = collections.Counter()
    stats = collections.Counter()
    stored = chunks = 0
    for chunk_bytes, payload in read_chunks(args.capture):
        chunks += 1
        stored += chunk_bytes
        parts = collections.defaultdict(bytearray)
        split_payload(payload, parts, stats)
        for name, data in parts.items():
            raw[name] += len(data)
            packed[name] += zstd_compress(bytes(data), args.level)
    events = args.events or stats["events"]
    print(f"{args.capture}: {chunks} chunks, {stored:,} bytes stored (headers included), "
          f"{events:,} events: {stored / max(events, 1):.3f} bytes per event")
    print(f"{'part':<28} {'raw':>12} {'zstd':>12} {'zstd/event':>11}")
    for name, size in packed.most_common():
        print(f"{name:<28} {raw[name]:>12,} {size:>12,} {size / max(events, 1):>11.3f}")
    print(f"{'sum of parts':<28} {sum(raw.values()):>12,} {sum(packed.values()):>12,} "
          f"{sum(packed.values()) / max(events, 1):>11.3f}")
    for key in sorted(stats):
        print(f"  {key}: {stats[key]:,}")


if __name__ == "__main__":
    main()
