"""docs/benchmarks.md from the measurements of bench/suite.py: the machine and versions, the
method, one table per metric (workloads down, columns across), and the bars of issue 6 each
marked met or not met."""
import datetime
import os
import platform
import statistics
import subprocess

CAPTURING = ["memlens", "memlens sampled", "memlens no index", "memlens baseline",
             "memlens sampled baseline", "heaptrack", "memray",
             "memray native+py"]
SAMPLED_BAR = 1.10
BYTES_BAR = 3.0
ANALYSIS_BAR = 10.0


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec=".2f"):
    return "–" if value is None else format(value, spec)


def millions(value):
    return "–" if not value else f"{value / 1e6:.2f} M"


class Cells:
    """Medians of one workload's results, and a cell's text when there is no number."""

    def __init__(self, case, native, by_column):
        self.case, self.name, self.native, self.by = case, case.label, native, by_column
        self.base = by_column.get("unprofiled", [])
        self.missing = case.missing
        self.label = f"{case.label} (**{case.missing}**)" if case.missing else case.label

    def ok(self, column):
        return [r for r in self.by.get(column, []) if "error" not in r]

    def why_not(self, column):
        """Text for a cell without a figure, or None when the column has one."""
        if self.missing:
            return "–"
        if column not in self.by:
            return "n/a"  # the column does not apply to this kind of workload
        if column in self.case.unavailable:
            return self.case.unavailable[column]
        runs = self.by[column]
        if not runs:
            return "–"
        if not self.ok(column):
            errors = sorted({r["error"] for r in runs})
            return "**" + ", ".join(errors) + "**" + ("" if len(runs) == 1 else
                                                       f" ({len(runs)}/{len(runs)} runs)")
        return None

    def suffix(self, column):
        failed = len(self.by[column]) - len(self.ok(column))
        return f" ({failed}/{len(self.by[column])} failed)" if failed else ""

    def ratio(self, column, key):
        """Median over rounds of this column's KEY over the unprofiled run's of that round."""
        pairs = zip(self.by.get(column, []), self.base)
        return median([r[key] / b[key] for r, b in pairs if key in r and b.get(key)])

    def value(self, column, key):
        return median([r.get(key) for r in self.ok(column)])

    def events(self):
        """The workload's events (allocations + frees): counted by the program itself for the
        native workloads, memlens full tracing's replayed count for the Python ones."""
        if self.native:
            return self.value("unprofiled", "program_events")
        return self.value("memlens", "events")

    def bytes_per_event(self, column):
        size, events = self.value(column, "size"), self.events()
        return size / events if size is not None and events else None

    def analysis_ratio(self, key="analyze"):
        """Median over rounds of heaptrack_print's time over memlens summary's (KEY: with the
        index, or replaying), same round."""
        pairs = zip(self.by.get("heaptrack", []), self.by.get("memlens", []))
        return median([h["analyze"] / m[key] for h, m in pairs
                       if "analyze" in h and m.get(key)])

    def heaptrack_comparable(self):
        """heaptrack sees malloc & co. only: its bars apply where it records (nearly) the same
        allocations as memlens, not where Python's own allocator does most of the work."""
        theirs, ours = self.value("heaptrack", "allocs"), self.value("memlens", "allocs")
        return theirs is not None and ours and theirs >= 0.9 * ours


def table(title, note, header, rows, level=3):
    lines = [f"{'#' * level} {title}", "", note, "", "| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def metric_table(all_cells, columns, title, note, cell, first=None, level=3):
    header = ["workload"] + ([first[0]] if first else []) + columns
    rows = []
    for c in all_cells:
        row = [c.label] + ([first[1](c)] if first else [])
        for column in columns:
            why = c.why_not(column)
            row.append(why if why else cell(c, column) + c.suffix(column))
        rows.append(row)
    return table(title, note, header, rows, level)


def analysis_table(all_cells, columns):
    header = ["workload", "events", "memlens summary s", "memlens summary, replaying s",
              "replay M events/s", "memlens index bytes/event", "heaptrack_print s",
              "heaptrack_print ÷ memlens summary", "heaptrack_print ÷ replaying summary",
              "memray stats s", "memray native+py: memray stats s", "memlens sampled: summary s"]
    rows = []
    for c in all_cells:
        def seconds(column, key="analyze"):
            if column not in columns:
                return "–"
            why = c.why_not(column)
            if why:
                return why
            errors = sorted({r["analyze_error"] for r in c.ok(column) if "analyze_error" in r})
            shown = fmt(c.value(column, key), ".3f")
            return shown + (f" (**{errors[0]}**)" if errors else "")
        events, replay = c.events(), c.value("memlens", "analyze_replay")
        rate = events / replay / 1e6 if events and replay else None
        index = c.value("memlens", "index_size")
        rows.append([c.label, millions(events), seconds("memlens"),
                     seconds("memlens", "analyze_replay"), fmt(rate, ".1f"),
                     fmt(index / events if index is not None and events else None, ".3f"),
                     seconds("heaptrack"), fmt(c.analysis_ratio()),
                     fmt(c.analysis_ratio("analyze_replay")),
                     seconds("memray"), seconds("memray native+py"),
                     seconds("memlens sampled")])
    return table("Analysis time", "Median seconds of each tool's analyzer on the capture of its "
                 "own run in the same round: `memlens summary CAPTURE`, `heaptrack_print FILE`, "
                 "`python -m memray stats CAPTURE`. `memlens run` indexes the capture while the "
                 "program runs (docs/snapshot-index.md; its cost is in the memlens columns "
                 "above), so `memlens summary` restores the index's end; \"replaying\" is the "
                 "same summary with `MEMLENS_INDEX=0`, which replays every event: the "
                 "analyzer's throughput is the workload's events (see the bytes-per-event "
                 "table) over that time. The index's size is not in the capture's bytes per "
                 "event; its own column says it. The heaptrack_print ratios are medians of "
                 "per-round ratios.",
                 header, rows)


def verdict(ok):
    return "**met**" if ok else "**not met**"


def as_shown(value):
    """A figure as the tables show it (two decimals): a bar is judged on what the reader sees,
    the noise of these medians being far above 0.01 anyway."""
    return round(value, 2) if value is not None else None


def bars(all_cells, keys=None, level=2, issue="issue 6"):
    """The bars of issue 6 (those in KEYS, default all), each workload where the peer applies:
    one line each."""
    out = {k: [] for k in ("heaptrack", "memray", "tracemalloc", "sampled", "bytes",
                           "analysis")}
    for c in all_cells:
        if c.missing:
            continue
        if c.why_not("memlens"):  # the table says why; so does each bar this row concerns
            for key, column in (("memray", "memray native+py"), ("tracemalloc", "tracemalloc")):
                if column in c.by:
                    out[key].append(f"{c.name}: memlens {c.why_not('memlens')}")
            continue
        ours = as_shown(c.ratio("memlens", "wall"))
        if "heaptrack" in c.by and not c.why_not("heaptrack"):
            theirs = as_shown(c.ratio("heaptrack", "wall"))
            if c.heaptrack_comparable():
                out["heaptrack"].append(f"{c.name}: memlens {ours:.2f}× vs heaptrack "
                                        f"{theirs:.2f}× (half: {theirs / 2:.2f}×): "
                                        + verdict(ours <= as_shown(theirs / 2)))
                ratio = as_shown(c.analysis_ratio())
                out["analysis"].append(
                    f"{c.name}: heaptrack_print takes {fmt(ratio, '.1f')}× memlens summary's "
                    "time: " + verdict(ratio is not None and ratio >= ANALYSIS_BAR) +
                    f" (replaying without the index: "
                    f"{fmt(c.analysis_ratio('analyze_replay'), '.1f')}×)")
            else:
                out["heaptrack"].append(
                    f"{c.name}: does not apply: heaptrack records "
                    f"{c.value('heaptrack', 'allocs'):,.0f} allocations, memlens "
                    f"{c.value('memlens', 'allocs'):,.0f} (heaptrack does not see Python's "
                    f"allocator; measured {ours:.2f}× vs {theirs:.2f}×)")
        elif "heaptrack" in c.by and c.why_not("heaptrack"):
            out["heaptrack"].append(f"{c.name}: heaptrack {c.why_not('heaptrack')}; memlens "
                                    f"{ours:.2f}×")
        for key, column in (("memray", "memray native+py"), ("tracemalloc", "tracemalloc")):
            if column in c.by and not c.why_not(column):
                theirs = as_shown(c.ratio(column, "wall"))
                # CPU time too: on a loaded machine a tool's helper thread gets its own share
                # of the cores, which wall time would count in its favour.
                cpu = [as_shown(c.ratio(k, "cpu")) for k in ("memlens", column)]
                out[key].append(f"{c.name}: memlens {ours:.2f}× vs {column} {theirs:.2f}×: "
                                + verdict(ours < theirs) + f" (CPU time: {fmt(cpu[0])}× vs "
                                f"{fmt(cpu[1])}×: " + verdict(None not in cpu and cpu[0] <
                                                               cpu[1]) + ")")
            elif column in c.by:  # a peer that cannot run here: said, not left out
                out[key].append(f"{c.name}: {column} {c.why_not(column)}; memlens "
                                f"{ours:.2f}×")
        if not c.why_not("memlens sampled"):
            sampled = as_shown(c.ratio("memlens sampled", "wall"))
            out["sampled"].append(f"{c.name}: {sampled:.2f}×: " +
                                  verdict(sampled <= SAMPLED_BAR))
        per_event = as_shown(c.bytes_per_event("memlens"))
        if per_event is not None:
            out["bytes"].append(f"{c.name}: {per_event:.2f} bytes per event: " +
                                verdict(per_event <= BYTES_BAR))
    titles = {
        "heaptrack": "memlens full tracing at most half of heaptrack's slowdown (where both "
                     "record the same allocations)",
        "memray": "memlens full tracing below memray `--native --trace-python-allocators`",
        "tracemalloc": "memlens full tracing below tracemalloc (`-X tracemalloc=1`)",
        "sampled": f"memlens sampled at the default rate at most {SAMPLED_BAR:.2f}×",
        "bytes": f"memlens full-tracing capture at most {BYTES_BAR:.0f} bytes per event",
        "analysis": f"memlens summary at least {ANALYSIS_BAR:.0f}× faster than heaptrack_print "
                    "on a capture of the same program (where both record the same "
                    "allocations)",
    }
    lines = [f"{'#' * level} The bars ({issue})", "", "Slowdowns are wall-clock medians of "
             "per-round ratios (the first table).", ""]
    for key, title in titles.items():
        if keys and key not in keys:
            continue
        lines.append(f"- {title}:")
        lines += [f"  - {line}" for line in out[key]] or ["  - not measured"]
    return "\n".join(lines) + "\n"


def failures(all_cells, level=2):
    lines = []
    for c in all_cells:
        for column, runs in c.by.items():
            details = sorted({f"{r['error']}: {r['detail']}" for r in runs if "error" in r})
            details += sorted({f"analysis {r['analyze_error']}" for r in runs
                               if "analyze_error" in r})
            lines += [f"- {c.name}, {column}: {d}" for d in details]
    if not lines:
        return ""
    return (f"{'#' * level} Failures\n\nThe line of each failing command's log that says why "
            "(logs in bench/results/):\n\n" + "\n".join(lines) + "\n")


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"


def pythons(setup):
    """Each interpreter under test: version, tag, executable and what it has installed."""
    return "; ".join(
        f"Python {first_line([i.py, '--version']).split()[-1]}"
        f"{' free-threaded' if i.tag.endswith('t') else ''} (`{i.py}`) with "
        + (", ".join(f"{m} {v}" for m, v in sorted(i.modules.items())) or "none of the peers")
        for i in setup.interpreters)


def header(setup, info):
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    commit = setup.commit
    memlens = first_line([str(setup.memlens), "--version"]) if setup.memlens else "not built"
    sampled = (f"sampled column `memlens run {' '.join(setup.sample_options)}`"
               if setup.sample_options else "no sampling mode in this build")
    scale = "1/10 of the full sizes (--quick)" if setup.args.quick else "full sizes"
    return f"""# Benchmarks

Generated by `{info['command']}` on {datetime.date.today()} in {info['minutes']:.0f} minutes
({setup.args.runs} rounds, {scale}); `python3 bench/suite.py` regenerates this file, and
bench/README.md says what it needs.

Machine: {len(os.sched_getaffinity(0))} CPUs (nproc), {cpu}, Linux {platform.release()}; load
average {info['load'][0]:.1f} at the start and {info['load'][1]:.1f} at the end (a shared
machine: read the ratios, not the seconds). Versions: memlens {memlens} (commit {commit},
{sampled}); {first_line(['heaptrack', '--version'])};
{pythons(setup)};
{first_line(['g++', '--version'])}.

## Method

- **Paired rounds.** Each round runs every column of a workload back to back, the order
  rotating from round to round, after one unmeasured unprofiled warm-up run per workload; a
  ratio is the median over rounds of the column's figure over the unprofiled run's figure in
  the same round, so a noisy moment hits both sides of a ratio. Every run must print what the
  unprofiled run printed (native: the allocation and free counts; Python: a checksum; black:
  the number of diff lines), else it counts as failed.
- **Slowdown** is wall time (`time.perf_counter` around the whole command, so it includes
  start-up and each tool's work at exit: heaptrack waits for its `heaptrack_interpret | zstd`
  pipeline, memray compresses its capture, memlens's writer drains). **CPU time** is user +
  system of the whole process tree (from `wait4`), which a busy machine disturbs less and
  which counts a tool's helper threads and processes.
- **Peak RSS** is `/usr/bin/time -f %M`: the largest single process of the command (for
  heaptrack that is usually `heaptrack_interpret`, which runs beside the target; the two are
  not summed). **The target's own peak RSS** is the VmHWM the profiled program's own process
  reports at exit (the native workloads print it; the Python workloads run under
  `bench/workloads/peak_rss.py`, which prints it; memray and Scalene run the script themselves
  and have no such figure): what the tool costs the program itself.
- **Bytes per event** is the capture's size over the workload's events (allocations +
  frees): for the native workloads the exact count the program prints itself, for the Python
  workloads the events that memlens full tracing replays from its capture of the same
  workload (median over rounds), the same denominator for every column. Scalene writes an
  aggregated profile and tracemalloc nothing, so they have no figure.
- **Allocations recorded** shows who sees what: `totals.allocations` of `memlens summary
  --json`, heaptrack's "calls to allocation functions", memray stats' "Total allocations".
- memlens runs from a copy of the build taken at the start (`bench/results/memlens`).
"""


def cells_of(cases, results, info):
    return [Cells(c, info["workloads"][c.name][0] == "native", results.get(c.label, {}))
            for c in cases]


def render(setup, cases, results, info):
    """The Markdown text. info: command, minutes, load (before, after), root (the checkout),
    workloads and columns (suite.WORKLOADS and suite.COLUMNS)."""
    workloads, columns = info["workloads"], info["columns"]
    all_cells = cells_of(cases, results, info)
    shown = [c for c in columns if c != "unprofiled" and c in setup.args.columns]
    capturing = [c for c in CAPTURING if c in shown]
    parts = [header(setup, info), "## Workloads\n"]
    for n in dict.fromkeys(c.name for c in cases):
        missing = setup.missing_workloads.get(n)
        parts.append(f"- `{n}`: {workloads[n][1]}" + (f" (**{missing}**)" if missing
                                                             else ""))
    parts.append("\n## Columns\n")
    parts += [f"- {c}: {columns[c][1]}" for c in ["unprofiled"] + shown]
    parts.append("\n“n/a”: the column does not apply to the workload (memray, tracemalloc and "
                 "Scalene profile Python programs only).\n\n## Results\n")
    parts += time_tables(all_cells, shown)
    parts.append(metric_table(all_cells, shown, "Peak resident memory × unprofiled",
                              "Largest process of the command; the unprofiled column in MiB.",
                              lambda c, col: fmt(c.ratio(col, "rss")),
                              ("unprofiled MiB", lambda c: fmt(c.value("unprofiled", "rss"),
                                                               ".1f"))))
    parts.append(metric_table(all_cells, shown, "Target's own peak resident memory × unprofiled",
                              "VmHWM of the profiled program's own process, which it prints "
                              "at exit (native workloads: themselves; Python workloads: "
                              "workloads/peak_rss.py around the script): what the tool costs "
                              "the program, without `memlens run`'s or heaptrack_interpret's "
                              "own memory; the unprofiled column in MiB. Issue 32's bar for "
                              "memlens full tracing: at most 1.15x, or unprofiled + 4 MiB "
                              "where that is larger.",
                              lambda c, col: fmt(c.ratio(col, "target_rss")),
                              ("unprofiled MiB", lambda c: fmt(
                                  c.value("unprofiled", "target_rss"), ".1f"))))
    parts.append(metric_table(all_cells, capturing, "Capture bytes per event",
                              "Capture size over the workload's events (same denominator "
                              "for every column).",
                              lambda c, col: fmt(c.bytes_per_event(col)),
                              ("events", lambda c: millions(c.events()))))
    parts.append(analysis_table(all_cells, shown))
    parts.append(metric_table(all_cells, capturing, "Allocations recorded",
                              "Median over rounds; for the sampled column, memlens's estimate from its samples.",
                              lambda c, col: fmt(c.value(col, "allocs"), ",.0f")))
    parts.append(bars(all_cells))
    parts.append(failures(all_cells))
    return "\n".join(p for p in parts if p)


def time_tables(all_cells, shown, level=3):
    unprofiled = ("unprofiled s", lambda c: fmt(c.value("unprofiled", "wall"), ".2f"))
    return [metric_table(all_cells, shown, "Slowdown (wall time × unprofiled)",
                         "Median of per-round ratios; the unprofiled column is the median wall "
                         "time in seconds.", lambda c, col: fmt(c.ratio(col, "wall")),
                         unprofiled, level),
            metric_table(all_cells, shown, "CPU time × unprofiled",
                         "User + system time of the whole process tree.",
                         lambda c, col: fmt(c.ratio(col, "cpu")),
                         ("unprofiled s", lambda c: fmt(c.value("unprofiled", "cpu"))), level)]


SECTION_BEGIN = "<!-- bench/suite.py --interpreters: begin -->"
SECTION_END = "<!-- bench/suite.py --interpreters: end -->"


def render_interpreters(setup, cases, results, info):
    """The section of docs/benchmarks.md that the suite writes with --interpreters: the Python
    workloads under each interpreter, the time tables and issue 26's bars."""
    all_cells = cells_of(cases, results, info)
    shown = [c for c in info["columns"] if c != "unprofiled" and c in setup.args.columns]
    commit = setup.commit
    memlens = first_line([str(setup.memlens), "--version"]) if setup.memlens else "not built"
    hooks = sorted(p.name[len("libmemlens_python"):-3] for p in
                   (setup.memlens.parent.parent / "lib").glob("libmemlens_python*.so")
                   ) if setup.memlens else []
    scale = "1/10 of the full sizes (--quick)" if setup.args.quick else "full sizes"
    interpreters = "\n".join(f"- {line}" for line in pythons(setup).split("; "))
    text = f"""## Python interpreters (issue 26)

Generated by `{info['command']}` on {datetime.date.today()} in {info['minutes']:.0f} min
({setup.args.runs} paired rounds, {scale}); the method above, every interpreter's rows in the
same rounds. Load average {info['load'][0]:.1f} at the start and {info['load'][1]:.1f} at the end
(a shared machine: read the ratios, not the seconds). memlens {memlens} (commit {commit}), with
Python hooks for {', '.join(hooks) or 'none'}. The interpreters:

{interpreters}

A cell that names a reason instead of a number: that column cannot run under that interpreter
(a peer not installed for it, or a memlens build without its hooks). tools/build-pythons
installs memray and black into its interpreters wherever PyPI has a wheel for them, so there
"not installed" means no wheel (pip's fallback for black is its pure-Python wheel, which the
list above marks: not the same program as the mypyc-compiled one).

"""
    parts = [text] + time_tables(all_cells, shown, level=3)
    parts.append(bars(all_cells, ("memray", "tracemalloc"), level=3, issue="issue 26"))
    parts.append(failures(all_cells, level=3))
    return SECTION_BEGIN + "\n" + "\n".join(p for p in parts if p) + SECTION_END + "\n"


def write(path, text, section=False):
    """Writes TEXT to PATH: for a section, in place of the file's own (or appended); for a
    whole file, keeping the interpreters section the file already has."""
    old = path.read_text() if path.exists() else ""
    begin, end = old.find(SECTION_BEGIN), old.find(SECTION_END)
    has = begin >= 0 and end >= 0
    if section:
        text = (old[:begin] + text + old[end + len(SECTION_END):].lstrip("\n") if has
                else old + ("\n" if old else "") + text)
    elif has:
        text = text + "\n" + old[begin:end + len(SECTION_END)] + "\n"
    path.write_text(text)
