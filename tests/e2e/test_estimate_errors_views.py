"""The errors of the sampled figures beyond the first ones (test_estimate_errors.py): summary's
heap line and totals.heap, the runtime's blocks, the leaks --suppressions hides, leaks --growth,
the HTML report's data, the CSV export, a custom heap's backing memory, and tree, timeline,
histogram, map and temporary. Each
expected error is computed here from the sampling model (src/format/sampling_model.h: a block
of s bytes recorded with probability p adds s^2(1-p)/p^2 and (1-p)/p^2) over the capture's own
recorded blocks (`memlens blocks --json`: each live block's real size); a full capture's output
carries none."""
import csv
import io
import json
import math
import os
import re
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, Recorded, memlens

RATE = 512 * 1024
SEED = "20261126"  # fixed: the same samples every run
SMALL, FLEETING = 1000, 5000  # tests/programs/estimate_errors.c
EXAMPLES = BUILD / "examples"


def record(tmp, program, *options, name, env=None, seed=SEED):
    capture = tmp / f"{name}.mlens"
    path = program if os.path.isabs(program) else PROGRAMS / program
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), *options, "--", str(path)],
                          capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, MEMLENS_SAMPLE_SEED=seed, **(env or {})))
    assert proc.returncode == 0, proc.stderr
    return Recorded(proc, capture)


def record_until(tmp, program, *options, name, size, at="", env=None):
    """The first of seeds 1, 2... whose capture recorded a live block of `size` bytes (at the
    snapshot `at`): one recorded with probability p is missed by 20 seeds with (1-p)^20."""
    for seed in range(1, 21):
        recorded = record(tmp, program, *options, name=f"{name}{seed}", env=env, seed=str(seed))
        blocks = json.loads(memlens("blocks", f"{recorded.capture}{at}", "--json").stdout)
        if any(b["size"] == size for b in blocks["blocks"]):
            return recorded
    pytest.fail(f"no seed of 20 recorded the block of {size} bytes")


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("errors_views")
    return (record(tmp, "estimate_errors", "--sample-rate", str(RATE), name="sampled"),
            record(tmp, "estimate_errors", name="full"))


class Model:
    """The capture's sampling model, from its own `capture` object."""

    def __init__(self, recorded):
        info = recorded.analyze("summary")["capture"]
        self.rate, self.exact_from = info["sample_rate"], info.get("sample_exact_from")
        assert self.rate

    def chance(self, size):
        if self.exact_from is not None and size >= self.exact_from:
            return 1.0
        return -math.expm1(-size / self.rate)

    def bytes_var(self, size):
        p = self.chance(size)
        return size * size * (1 - p) / p**2

    def blocks_var(self, size):
        p = self.chance(size)
        return (1 - p) / p**2

    def weight(self, size):  # what a recorded block stands for, rounded as the replay does
        return round(size / self.chance(size))


def live(recorded, domains=("native", "python")):
    """Sizes of the recorded heap blocks live at the end, with their innermost function names."""
    data = recorded.analyze("blocks")
    frames = {s["id"]: [f["function"] for f in s["frames"]] for s in data["stacks"]}
    return [(b["size"], frames[b["stack"]]) for b in data["blocks"] if b["domain"] in domains]


def near(error, variance, rel=2e-3, abs=0.5):
    assert error == pytest.approx(math.sqrt(variance), rel=rel, abs=abs), (error, variance)


def keys(value):
    if isinstance(value, dict):
        return set(value) | set().union(*map(keys, value.values()))
    return set().union(*map(keys, value)) if isinstance(value, list) else set()


def small_variances(recorded, model):
    n = sum(1 for size, _ in live(recorded) if size == SMALL)
    assert n > 0, "no block of 1,000 bytes was recorded: choose another seed"
    return n * model.bytes_var(SMALL), n * model.blocks_var(SMALL)


def fleeting_recorded(recorded, model):
    """How many 5,000-byte blocks were recorded: none is live at the end, but each recorded one
    added its weight to the site's allocated bytes."""
    row = next(r for r in recorded.analyze("top", "--by", "function", "--limit", "100")["rows"]
               if r["site"]["function"] == "fleeting")
    n, rest = divmod(row["allocated_bytes"], model.weight(FLEETING))
    assert rest == 0 and n > 0, row
    return n


def test_summary_heap_line_and_totals_heap(captures):
    sampled, full = captures
    model = Model(sampled)
    live_var = sum(model.bytes_var(size) for size, _ in live(sampled))
    summary = sampled.analyze("summary")
    t, heap, runtime = summary["totals"], summary["totals"]["heap"], summary["runtime"]
    # Heap and runtime together are every live heap block; the mapping is exact.
    near(math.hypot(heap["in_use_bytes_error"], runtime["bytes_error"]), live_var)
    assert heap["in_use_bytes_error"] == t["in_use_at_exit_bytes_error"]
    assert heap["allocated_bytes_error"] == t["allocated_bytes_error"]
    assert heap["at_peak_bytes_error"] == t["peak_bytes_error"]
    assert not any(k.endswith("_error") for k in t["mappings"]), t["mappings"]
    assert t["mappings"]["in_use_bytes"] == 2 << 20
    # The whole peak is at the end (the 2 MiB mapping); the heap's own came before it, while a
    # recorded 5,000-byte block was live beside everything kept.
    near(t["peak_bytes_error"], live_var)
    at_end = heap["in_use_bytes"] + runtime["bytes"]
    assert heap["peak_bytes"] == at_end + model.weight(FLEETING), (heap, at_end)
    near(heap["peak_bytes_error"], live_var + model.bytes_var(FLEETING))

    text = memlens("summary", str(sampled.capture)).stdout
    heap_line = next(line for line in text.splitlines() if line.split()[:1] == ["heap"])
    assert heap_line.count("±") == 3, heap_line
    mappings = next(line for line in text.splitlines() if line.split()[:1] == ["mappings"])
    assert "±" not in mappings and "recorded in full: exact" in mappings, mappings
    plain = memlens("summary", str(full.capture)).stdout
    assert "±" not in plain and "exact)" not in plain, plain
    assert not any(k.endswith("_error") for k in keys(full.analyze("summary")))


def test_runtime_blocks_carry_their_error(tmp_path):
    # At 4 KiB, with no block recorded whole, libstdc++'s pool (72,704 bytes) is all but
    # certain and stdout's buffer (4,096 bytes) is recorded with p = 0.63.
    sampled = record_until(tmp_path, "runtime_noise", "--sample-rate", "4096", name="runtime",
                           size=4096, env={"MEMLENS_SAMPLE_EXACT_FROM": str(1 << 30)})
    model = Model(sampled)
    assert model.exact_from is None or model.exact_from >= 1 << 30
    kept = [size for size, _ in live(sampled) if size != 1000]  # all but the program's leak
    summary = sampled.analyze("summary")
    runtime = summary["runtime"]
    assert runtime["bytes"] == sum(model.weight(size) for size in kept), (runtime, kept)
    near(runtime["bytes_error"], sum(model.bytes_var(size) for size in kept))
    near(runtime["blocks_error"], sum(model.blocks_var(size) for size in kept), abs=0.05)
    rules = {r["rule"]: r for r in runtime["rules"]}
    near(rules["stdio-buffers"]["bytes_error"], model.bytes_var(4096))
    near(math.hypot(*(r["bytes_error"] for r in runtime["rules"])),
         runtime["bytes_error"] ** 2)
    assert sampled.analyze("leaks")["runtime"] == runtime
    for view in ("summary", "leaks"):
        text = memlens(view, str(sampled.capture)).stdout
        line = next(line for line in text.splitlines() if "kept by the C/C++ runtime" in line)
        assert line.count("±") == 2, (view, line)


def test_suppressed_leaks_carry_their_error(captures, tmp_path):
    sampled, full = captures
    small_bytes, small_blocks = small_variances(sampled, Model(sampled))
    patterns = tmp_path / "suppressions"
    patterns.write_text("function:small\n")
    leaks = sampled.analyze("leaks", "--suppressions", str(patterns))
    suppressed = leaks["suppressed"]
    assert suppressed["stacks"] == 1
    near(suppressed["bytes_error"], small_bytes)
    near(suppressed["blocks_error"], small_blocks, abs=0.05)
    text = memlens("leaks", str(sampled.capture), "--suppressions", str(patterns)).stdout
    assert re.search(r"\(suppressed: \S+ \S+ ±\S+ \S+ in \S+ ±\S+ blocks from 1 call stack\)",
                     text), text
    plain = full.analyze("leaks", "--suppressions", str(patterns))["suppressed"]
    assert set(plain) == {"stacks", "bytes", "blocks"}, plain


def test_growth_carries_its_error(tmp_path):
    # grows.c: 64-byte nodes added to a list for about 1 s; at 256 bytes each is recorded with
    # p = 0.22 and stands for 290 bytes.
    sampled = record(tmp_path, "grows", "--sample-rate", "256", name="grows")
    model = Model(sampled)
    growth = sampled.analyze("leaks", "--growth")
    rows = [g for g in growth["growing"] if g["site"]["function"] == "grow_list"]
    assert len(rows) == 1, growth["growing"]
    g = rows[0]
    weight = model.weight(64)
    variances = []
    for bytes_, error in zip(g["bytes"], g["bytes_error"], strict=True):
        n, rest = divmod(bytes_, weight)
        assert rest == 0, (bytes_, weight)
        variances.append(n * model.bytes_var(64))
        near(error, variances[-1])
    near(g["growth_bytes_error"], variances[0] + variances[-1])
    assert g["in_use_at_end"] == 0 and g["in_use_at_end_error"] == 0
    for c in growth["checkpoints"]:
        assert c["heap_bytes_error"] >= 0 and "heap_bytes" in c
    near(growth["checkpoints"][-1]["heap_bytes_error"], variances[-1])
    text = memlens("leaks", str(sampled.capture), "--growth").stdout
    assert re.search(r"#1  \+\S+ \S+ ±\S+ \S+ \(.* ±.* -> .* ±", text), text


def report_data(tmp_path, recorded, name):
    html = tmp_path / f"{name}.html"
    out = memlens("report", str(recorded.capture), "-o", str(html))
    assert out.returncode == 0, out.stderr
    page = html.read_text()
    found = re.search(r'<script type="application/json" id="memlens-data"[^>]*>(.*?)</script>',
                      page, re.S)
    assert found, "no data in the report"
    return json.loads(found.group(1))


def find_node(node, function, data):
    """The first tree node (depth first) whose frame's function is `function`."""
    if node[0] >= 0 and data["strings"][data["frames"][node[0]][0]] == function:
        return node
    for child in (node[3] if len(node) > 3 else []):
        if (found := find_node(child, function, data)) is not None:
            return found
    return None


def test_report_data_carries_the_errors(captures, tmp_path):
    sampled, full = captures
    model = Model(sampled)
    small_bytes, small_blocks = small_variances(sampled, model)
    live_var = sum(model.bytes_var(size) for size, _ in live(sampled))
    data = report_data(tmp_path, sampled, "sampled")
    summary = sampled.analyze("summary")
    # The flame trees: [frame, total, self, children, total_error, self_error].
    root = data["trees"]["in_use"]["root"]
    assert root[4] == pytest.approx(summary["totals"]["in_use_at_exit_bytes_error"], rel=1e-5)
    node = find_node(root, "small", data)
    assert node is not None and node[1] > 0
    near(node[4], small_bytes)
    near(node[5], small_bytes)  # every block of the site is allocated in `small` itself
    # The checkpoints: the last is the snapshot, the runtime's blocks included.
    last = data["checkpoints"][-1]
    near(last["heap_bytes_error"], live_var)
    sites = {data["strings"][data["frames"][f][0]]: k for k, f in enumerate(data["sites"])}
    errors = dict(zip(last["live_error"][::2], last["live_error"][1::2]))
    assert last["live"][::2] == last["live_error"][::2]
    near(errors[sites["small"]], small_bytes)
    assert all("heap_bytes_error" in c for c in data["checkpoints"])
    assert data["timeline"]["peak"]["bytes_error"] == pytest.approx(
        summary["totals"]["peak_bytes_error"], rel=1e-5)
    # Sizes: [count, bytes, count_error, bytes_error]; 1,000 bytes is in the class [512, 1024).
    count, bytes_, count_error, bytes_error = data["size_histogram"][9]
    near(count_error, small_blocks, abs=0.05)
    near(bytes_error, small_bytes)
    n = fleeting_recorded(sampled, model)  # 5,000 bytes: the class [4096, 8192)
    near(data["size_histogram"][12][3], n * model.bytes_var(FLEETING))
    # The map's regions: in_use_bytes_error, blocks_error after the seven figures.
    regions = data["address_map"]["regions"]
    near(math.hypot(*(r[7] for r in regions)), live_var)
    assert [r[7] for r in regions if r[5] == "mapping"] == [0]

    plain = report_data(tmp_path, full, "full")
    assert "live_error" not in keys(plain) and "heap_bytes_error" not in keys(plain)
    assert all(len(b) == 2 for b in plain["size_histogram"])
    assert all(len(r) == 7 for r in plain["address_map"]["regions"])
    assert len(plain["trees"]["in_use"]["root"]) <= 4


def test_views_carry_their_errors(captures):
    """tree, timeline, histogram, map, temporary and the CSV export, against the model."""
    sampled, full = captures
    model = Model(sampled)
    small_bytes, small_blocks = small_variances(sampled, model)
    live_var = sum(model.bytes_var(size) for size, _ in live(sampled))
    n_fleeting = fleeting_recorded(sampled, model)

    def node(tree, function):
        if tree.get("frame", {}).get("function") == function:
            return tree
        return next((found for c in tree["children"] if (found := node(c, function))), None)

    small = node(sampled.analyze("tree", "--metric", "leaked")["root"], "small")
    near(small["total_error"], small_bytes)
    near(small["self_error"], small_bytes)
    counted = node(sampled.analyze("tree", "--metric", "count")["root"], "small")
    near(counted["total_error"], small_blocks, abs=0.05)

    near(sampled.analyze("timeline")["heap"][-1]["bytes_error"], live_var)

    buckets = {b["min_size"]: b for b in sampled.analyze("histogram")["buckets"]}
    near(buckets[512]["bytes_error"], small_bytes)
    near(buckets[512]["count_error"], small_blocks, abs=0.05)
    near(buckets[4096]["bytes_error"], n_fleeting * model.bytes_var(FLEETING))

    mapped = sampled.analyze("map")
    regions = mapped["regions"]
    near(math.hypot(*(r["in_use_bytes_error"] for r in regions)), live_var)
    near(mapped["in_use_bytes_error"], live_var)
    assert [r["in_use_bytes_error"] for r in regions if r["kind"] == "mapping"] == [0]

    # Every recorded 5,000-byte block is freed before its thread's next recorded allocation.
    temporary = sampled.analyze("temporary")
    row = next(r for r in temporary["sites"] if r["site"]["function"] == "fleeting")
    near(row["temporary_bytes_error"], n_fleeting * model.bytes_var(FLEETING))
    near(row["temporary_error"], n_fleeting * model.blocks_var(FLEETING), abs=0.05)

    out = memlens("export", "csv", str(sampled.capture), "--by", "function", "-o", "-")
    assert out.returncode == 0, out.stderr
    rows = {r["function"]: r for r in csv.DictReader(io.StringIO(out.stdout))}
    near(float(rows["small"]["in_use_bytes_error"]), small_bytes, abs=0.06)
    near(float(rows["small"]["in_use_blocks_error"]), small_blocks, abs=0.06)

    # The lines above the tables and charts, and each stack's heading.
    first_lines = {
        "timeline": r"; peak \S+ \S+ ±\S+ \S+ at ",
        "histogram": r": \S+ ±\S+ allocations, \S+ \S+ ±\S+ \S+\n",
        "map": r"Address space in use at exit: \S+ \S+ ±\S+ \S+ in ",
    }
    for view, pattern in first_lines.items():
        text = memlens(view, str(sampled.capture)).stdout
        assert re.search(pattern, text), (view, text)
    text = memlens("top", str(sampled.capture), "--by", "stack").stdout
    assert re.search(r"\nstack #1 \(\S+ \S+ ±\S+ \S+\):\n", text), text
    for view in ("tree", "timeline", "histogram", "map", "temporary"):
        text = memlens(view, str(sampled.capture)).stdout
        assert "±" in text, (view, text)
        assert "±" not in memlens(view, str(full.capture)).stdout, view
        assert not any(k.endswith("_error") for k in keys(full.analyze(view))), view
    plain = memlens("export", "csv", str(full.capture), "--by", "function", "-o", "-").stdout
    assert "_error" not in plain.splitlines()[0]


def test_custom_heaps_backing_memory_carries_its_error(tmp_path):
    # examples/foo_pool: FooHeap's blocks lie in one malloc'd block of 1,024 bytes. At 1 KiB,
    # with no block recorded whole, that block is recorded with p = 0.63 and stands for 1,620.
    sampled = record_until(tmp_path, str(EXAMPLES / "foo_pool"), "--sample-rate", "1024",
                           name="pool", size=1024, at="@snapshot:nine-foos",
                           env={"MEMLENS_SAMPLE_EXACT_FROM": str(1 << 30)})
    at = f"{sampled.capture}@snapshot:nine-foos"
    model = Model(sampled)
    data = json.loads(memlens("summary", at, "--json").stdout)
    foo = next(h for h in data["custom_heaps"] if h["name"] == "FooHeap")
    assert (foo["in_use_blocks"], foo["in_use_bytes"]) == (9, 9 * 64)  # recorded in full
    assert not any(k.endswith("_error") for k in foo if not k.startswith("backing_"))
    assert (foo["backing_blocks"], foo["backing_bytes"]) == (2, model.weight(1024))
    near(foo["backing_bytes_error"], model.bytes_var(1024))
    near(foo["backing_blocks_error"], model.blocks_var(1024), abs=0.05)
    text = memlens("summary", at).stdout
    assert re.search(r"\S+ KiB ±\S+ \S+ in 2 ±1 ", text), text
