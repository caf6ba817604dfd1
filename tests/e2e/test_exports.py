"""`memlens export` (docs/exports.md): each format read back by its own consumer (go tool pprof,
speedscope's published schema, and small parsers here for the text formats) and compared with
the exact bytes tests/programs/export_sites.c allocates at its marked lines."""
import csv
import io
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, REPO, line_of, memlens

SOURCE = "export_sites.c"
SPEEDSCOPE_CHECK = REPO / "tests" / "exports"  # npm ci --prefix tests/exports (.ci/run)

# What export_sites.c does, by the function that allocates: (allocations, allocated bytes,
# blocks in use at exit, bytes in use at exit, bytes live at the peak).
KNOWN = {"churn_blocks": (5, 35_000, 0, 0, 0),
         "keep_blocks": (4, 12_000, 4, 12_000, 12_000),
         "big_block": (1, 50_000, 0, 0, 50_000)}
MARKERS = {"churn_blocks": "churn", "keep_blocks": "keep", "big_block": "big"}
PEAK = 62_000


def go():
    """Go's toolchain (Debian's golang-go puts it in /usr/lib/go/bin, not on PATH)."""
    for candidate in (shutil.which("go"), "/usr/lib/go/bin/go", "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("go tool pprof is what checks the pprof export: install golang-go (.ci/run does)",
                pytrace=False)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exports")
    path = tmp / "sites.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(path), "--", str(PROGRAMS / "export_sites")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return path


def export(fmt, capture, *args, binary=False):
    """The export's bytes (text unless binary), written to stdout with -o -."""
    out = subprocess.run([str(MEMLENS), "export", fmt, str(capture), "-o", "-", *args],
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()
    return out.stdout if binary else out.stdout.decode()


def pprof(capture, tmp_path, *args, moment=""):
    """`go tool pprof -raw` of the export, parsed: samples as ({type: value}, [(function, file,
    line)...] leaf first), plus the header lines (PeriodType, Period...) as a dict."""
    path = tmp_path / "heap.pb.gz"
    path.write_bytes(export("pprof", f"{capture}{moment}", *args, binary=True))
    raw = subprocess.run([go(), "tool", "pprof", "-raw", str(path)], capture_output=True,
                         text=True, timeout=300)
    assert raw.returncode == 0, raw.stderr
    header, samples, locations, section, types = {}, [], {}, None, []
    current = None
    for line in raw.stdout.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
        elif section is None and ": " in line:
            key, value = line.split(": ", 1)
            header[key] = value.strip()
        elif section == "Samples:" and not types:
            types = [t.replace("[dflt]", "") for t in line.split()]
        elif section == "Samples:":
            values, ids = line.split(":", 1)
            samples.append((dict(zip(types, map(int, values.split()))), list(map(int, ids.split()))))
        elif section == "Locations":
            # "   3: 0xADDR M=1 function file:line s=0", then "  inlined file:line s=0" lines
            # (newer versions write file:line:column; "(system name)" follows when it differs).
            m = re.match(r"\s*(\d+): (?:0x[0-9a-f]+ )?(?:M=\d+ )?(.*) (\S*?):(\d+)(?::\d+)? s=\d+(?:\(.*\))?$", line)
            if m:
                current = int(m.group(1))
                locations[current] = [(m.group(2), m.group(3), int(m.group(4)))]
            else:
                m = re.match(r"\s+(.*) (\S*?):(\d+)(?::\d+)? s=\d+(?:\(.*\))?$", line)
                assert m and current, line
                locations[current].append((m.group(1), m.group(2), int(m.group(3))))
    stacks = [(values, [frame for i in ids for frame in locations[i]]) for values, ids in samples]
    return header, stacks


def by_site(stacks, value):
    """{function: value} summed over the samples whose leaf is one of KNOWN's functions at its
    marked line."""
    found = {}
    for values, frames in stacks:
        function, file, line = frames[0]
        if function in KNOWN and file.endswith("/" + SOURCE) and line == line_of(SOURCE, MARKERS[function]):
            found[function] = found.get(function, 0) + values[value]
    return found


def test_pprof_holds_gos_heap_sample_types_with_the_exact_bytes(capture, tmp_path):
    header, stacks = pprof(capture, tmp_path)
    assert by_site(stacks, "alloc_objects/count") == {f: k[0] for f, k in KNOWN.items()}
    assert by_site(stacks, "alloc_space/bytes") == {f: k[1] for f, k in KNOWN.items()}
    assert by_site(stacks, "inuse_objects/count") == {f: k[2] for f, k in KNOWN.items()}
    assert by_site(stacks, "inuse_space/bytes") == {f: k[3] for f, k in KNOWN.items()}
    # The whole stack, caller after callee, with the marked line of each.
    keep = [frames for values, frames in stacks if frames[0][0] == "keep_blocks"]
    assert [f[0] for f in keep[0][:3]] == ["keep_blocks", "keep_path", "main"]
    assert header["Comment"] == "memlens: in use at exit"
    assert header.get("Period", "0") == "0"  # every allocation recorded: no sampling period


def test_pprof_top_reads_the_default_and_the_chosen_sample_type(capture, tmp_path):
    path = tmp_path / "heap.pb.gz"
    for metric, default, bytes_ in (("in-use", "inuse_space", {"keep_blocks": 12_000}),
                                    ("allocated", "alloc_space",
                                     {"churn_blocks": 35_000, "keep_blocks": 12_000, "big_block": 50_000})):
        path.write_bytes(export("pprof", capture, "--metric", metric, binary=True))
        top = subprocess.run([go(), "tool", "pprof", "-top", "-unit=B", str(path)],
                             capture_output=True, text=True, timeout=300)
        assert top.returncode == 0, top.stderr
        assert f"Type: {default}" in top.stdout
        flat = {}
        for line in top.stdout.splitlines():
            m = re.match(r"\s*(\d+)B\s+\S+%\s+\S+%\s+\S+\s+\S+%\s+(\S+)$", line)
            if m and int(m.group(1)):
                flat[m.group(2)] = int(m.group(1))
        assert flat == bytes_


def test_pprof_at_a_moment_and_with_filters(capture, tmp_path):
    _, stacks = pprof(capture, tmp_path, moment="@peak")
    assert by_site(stacks, "inuse_space/bytes") == {f: k[4] for f, k in KNOWN.items()}
    _, stacks = pprof(capture, tmp_path, "--exclude", "function:keep_path")
    assert set(by_site(stacks, "alloc_space/bytes")) == {"churn_blocks", "big_block"}


def test_pprof_of_a_sampled_capture_carries_its_period(tmp_path):
    path = tmp_path / "sampled.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "--sample", "-o", str(path), "--",
                           str(PROGRAMS / "sampled_known")], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, MEMLENS_SAMPLE_SEED="20261121"))
    assert proc.returncode == 0, proc.stderr
    rate = json.loads(memlens("summary", path, "--json").stdout)["capture"]["sample_rate"]
    header, stacks = pprof(path, tmp_path)
    assert header["PeriodType"] == "space bytes"
    assert int(header["Period"]) == rate
    # The values are the views' estimates, already scaled.
    rows = json.loads(memlens("top", path, "--json", "--by", "stack", "--limit", "100000").stdout)["rows"]
    assert sum(v["inuse_space/bytes"] for v, _ in stacks) == sum(r["leaked_bytes"] for r in rows)


def test_speedscope_is_valid_for_speedscopes_schema_with_the_exact_bytes(capture, tmp_path):
    if not (SPEEDSCOPE_CHECK / "node_modules" / "speedscope").exists():
        pytest.fail("npm ci --prefix tests/exports installs speedscope's schema and ajv (.ci/run does)",
                    pytrace=False)
    for metric, column in (("in-use", 3), ("allocated", 1), ("peak", 4)):
        path = tmp_path / f"{metric}.speedscope.json"
        path.write_text(export("speedscope", capture, "--metric", metric))
        check = subprocess.run(["node", str(SPEEDSCOPE_CHECK / "validate-speedscope.mjs"), str(path)],
                               capture_output=True, text=True, timeout=120)
        assert check.returncode == 0 and check.stdout.strip() == "valid", check.stdout + check.stderr
        data = json.loads(path.read_text())
        frames = data["shared"]["frames"]
        profile = data["profiles"][data["activeProfileIndex"]]
        assert profile["unit"] == "bytes"
        found = {}
        for sample, weight in zip(profile["samples"], profile["weights"], strict=True):
            leaf = frames[sample[-1]]  # samples are root first
            assert [frames[i]["name"] for i in sample].index("main") < len(sample) - 1
            if leaf["name"] in KNOWN:
                assert leaf["line"] == line_of(SOURCE, MARKERS[leaf["name"]])
                assert leaf["file"].endswith("/" + SOURCE)
                found[leaf["name"]] = found.get(leaf["name"], 0) + weight
        assert found == {f: k[column] for f, k in KNOWN.items() if k[column]}
        assert profile["endValue"] == sum(profile["weights"])


def folded(capture, *args):
    """{stack: bytes} of the folded export, checked line by line as flamegraph.pl reads it."""
    stacks = {}
    for line in export("folded", capture, *args).splitlines():
        m = re.fullmatch(r"(.+) (\d+)", line)
        assert m, line
        assert m.group(1) not in stacks  # one line per stack
        stacks[m.group(1)] = int(m.group(2))
    return stacks


def test_folded_stacks_root_first_with_the_exact_bytes(capture):
    def at(function, stacks):
        frame = f"{function} ({SOURCE}:{line_of(SOURCE, MARKERS[function])})"
        return {s: b for s, b in stacks.items() if s.endswith(";" + frame)}

    in_use = folded(capture)
    keep = at("keep_blocks", in_use)
    assert list(keep.values()) == [12_000]
    assert re.search(r";main \(export_sites\.c:\d+\);keep_path \(export_sites\.c:\d+\);keep_blocks ",
                     next(iter(keep)))
    assert at("churn_blocks", in_use) == {} and at("big_block", in_use) == {}
    allocated = folded(capture, "--metric", "allocated")
    peak = folded(capture, "--metric", "peak")
    for function, known in KNOWN.items():
        assert sum(at(function, allocated).values()) == known[1]
        assert sum(at(function, peak).values()) == known[4]
    only = folded(capture, "--metric", "allocated", "--include", "function:churn_blocks")
    assert sum(only.values()) == 35_000 and len(only) == 1


def test_chrome_trace_heap_counter_markers_and_peak(capture):
    trace = json.loads(export("chrome-trace", capture))
    events = trace["traceEvents"]
    counter = [(e["ts"], e["args"]["bytes"]) for e in events if e["ph"] == "C" and e["name"] == "heap in use"]
    assert counter == sorted(counter)  # in time order
    # export_sites holds each level for 300 ms, longer than the writer's 100 ms between marks.
    assert {b for _, b in counter} == {0, 12_000, PEAK}
    instants = {e["name"]: e for e in events if e["ph"] == "i"}
    assert instants["kept"]["cat"] == "phase"
    assert instants["after"]["cat"] == "snapshot"
    # The peak is between the marker and the snapshot request; the counter is at it then.
    assert instants["kept"]["ts"] < instants["peak"]["ts"] < instants["after"]["ts"]
    assert max(b for _, b in counter) == PEAK
    assert [e["args"]["name"] for e in events if e["ph"] == "M"] == ["export_sites"]


def test_csv_rows_rfc4180_with_the_exact_figures(capture):
    text = export("csv", capture, "--metric", "allocated")
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", "")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    known = [r for r in rows if r["function"] in KNOWN]
    # Sorted by the metric, largest first.
    assert [r["function"] for r in known] == ["big_block", "churn_blocks", "keep_blocks"]
    for r in known:
        a, allocated, blocks, in_use, peak = KNOWN[r["function"]]
        assert int(r["line"]) == line_of(SOURCE, MARKERS[r["function"]])
        assert (int(r["allocations"]), int(r["allocated_bytes"]), int(r["in_use_blocks"]),
                int(r["in_use_bytes"]), int(r["peak_bytes"])) == (a, allocated, blocks, in_use, peak)
    stacks = list(csv.DictReader(io.StringIO(export("csv", capture, "--by", "stack", "--limit", "1"),
                                             newline="")))
    assert len(stacks) == 1 and stacks[0]["function"] == "keep_blocks"
    assert ";keep_path (" in stacks[0]["stack"]


def test_default_output_file_and_every_format_in_help_and_docs(capture, tmp_path):
    out = memlens("export", "folded", capture, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "sites.folded").read_text() == export("folded", capture)
    assert out.stderr == f"memlens: wrote sites.folded (folded, {len(export('folded', capture))} B)\n"
    help_text = memlens("export", "--help").stdout
    names = re.findall(r"^  (\S+) {2,}", help_text.split("Formats")[1], re.M)
    assert names == ["pprof", "speedscope", "folded", "chrome-trace", "csv"]
    docs = (REPO / "docs" / "exports.md").read_text()
    for name in names:
        assert f"## {name}" in docs, f"docs/exports.md has no section for {name}"


@pytest.mark.parametrize("args, message", [
    (["nosuch", "{capture}"], "memlens: export: unknown format 'nosuch' (formats: pprof, speedscope, "
                              "folded, chrome-trace, csv)"),
    (["pprof", "{missing}"], "memlens: cannot open '{missing}'"),
    (["folded", "{capture}", "-o", "/nonexistent/dir/x.folded"],
     "memlens: export: cannot write '/nonexistent/dir/x.folded'"),
    (["pprof", "{capture}", "--metric", "peak"],
     "memlens: export: pprof has no peak sample type: export CAPTURE@peak, whose in-use figures "
     "are the peak's"),
    (["folded", "{capture}", "--metric", "most"],
     "memlens: export: --metric must be in-use, allocated or peak"),
])
def test_bad_input_one_line_exit_2(capture, tmp_path, args, message):
    values = {"capture": capture, "missing": tmp_path / "missing.mlens"}
    out = memlens("export", *[a.format(**values) for a in args])
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.splitlines() == [message.format(**values)] or (
        "{missing}" in message and len(out.stderr.splitlines()) == 1
        and out.stderr.startswith(message.format(**values)))


def test_python_functions_in_pprof(python, tmp_path):
    """A Python program's export: its Python functions and lines in the pprof, with the views'
    bytes."""
    hooks = BUILD / "lib" / f"libmemlens_python{python.tag}.so"
    if not hooks.exists():
        pytest.skip(f"no Python hooks for {python} (memlens was built without its headers)")
    scripts = REPO / "tests" / "python" / "scripts"
    path = tmp_path / "python.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(path), "--", str(python),
                           str(scripts / "lines.py")], capture_output=True, text=True, timeout=300,
                          cwd=scripts)
    assert proc.returncode == 0, proc.stderr
    line = next(n for n, text in enumerate((scripts / "lines.py").read_text().splitlines(), 1)
                if text.endswith("# @bytearray"))
    rows = json.loads(memlens("top", path, "--json", "--by", "line", "--limit", "100000").stdout)["rows"]
    row = [r for r in rows if r["site"]["file"].endswith("/lines.py") and r["site"]["line"] == line]
    assert len(row) == 1 and row[0]["leaked_bytes"] >= 50_000_000
    _, stacks = pprof(path, tmp_path)
    at_line = [(values, frames) for values, frames in stacks
               if any(f[0] == "make_bytearray" and f[1].endswith("/lines.py") and f[2] == line
                      for f in frames)]
    assert sum(v["inuse_space/bytes"] for v, _ in at_line) == row[0]["leaked_bytes"]
    # Python frames above the native ones that allocated, and the module's code as the caller.
    names = [f[0] for f in at_line[0][1]]
    assert names.index("make_bytearray") < names.index("<module>")


def test_an_empty_stack_export_says_why_and_what_to_ask_instead(capture, tmp_path):
    """Nothing churn_blocks allocated is in use at exit: its folded export is empty, and the
    command says so (an empty flame graph opened without a word reads as a broken export)."""
    def run(*args):
        return subprocess.run([str(MEMLENS), "export", "folded", str(capture), "-o",
                               str(tmp_path / "out.folded"), *args],
                              capture_output=True, text=True, timeout=60)
    empty = run("--include", "function:churn_blocks")
    assert empty.returncode == 0, empty.stderr
    assert (tmp_path / "out.folded").read_text() == ""
    assert ("memlens: note: no stack has in-use bytes (exit); --metric allocated weighs each by "
            "what it allocated, CAPTURE@peak shows the peak") in empty.stderr
    allocated = run("--include", "function:churn_blocks", "--metric", "allocated")
    assert "note:" not in allocated.stderr
    assert (tmp_path / "out.folded").read_text().rstrip("\n").endswith(" 35000")
    assert "note:" not in run().stderr  # keep_blocks' 12,000 bytes are in use
