"""The `%%memlens` cell magic for IPython and Jupyter (`%load_ext memlens`; docs/notebook.md).

    %%memlens [--native | --no-native] [--leaks] [--sample-rate N] [--python-frames N]
              [-o CAPTURE] [--height PIXELS]
    <the cell's code>

runs the cell inside a memlens.Tracker span and returns an IPython.display.HTML object (shown
as the cell's output): the cell's peak and what it left in use, by source line, then memlens's
HTML report of the span (flame graphs, timeline, top sites: `memlens report`), which is one
self-contained page, offline. The page sits in a sandboxed iframe (srcdoc) so that its CSS and
scripts cannot touch the notebook's, nor the notebook's it.

Lines are counted from the cell's first line, the `%%memlens` line, as the notebook shows them.
The cell's last expression is not displayed: the report is the cell's output.
"""
import gc
import html
import os
import tempfile

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import HTML

import memlens
from memlens import _cli
from memlens._sizes import format_size

_ROWS = 5  # sites listed in each table above the report

# After the report has drawn itself, opens its flame graph on "in use at the end" (--leaks):
# the tab is a button of #flame-tabs with data-tree="in_use" (src/report/report.js).
_SHOW_IN_USE = ("<script>window.addEventListener('load', () => { const tab = document."
                "querySelector('#flame-tabs [data-tree=\"in_use\"]'); if (tab) tab.click(); });"
                "</script>")


def _site(row):
    site = row["site"]
    if site["file"]:
        return f"{site['file']}:{site['line']} ({site['function'] or '??'})"
    return f"{site['function'] or '??'} ({os.path.basename(site['module'])})"


def _table(title, rows, field):
    rows = [r for r in rows if r[field]][:_ROWS]
    if not rows:
        return f"<p><b>{html.escape(title)}</b>: none</p>"
    body = "".join(
        f"<tr><td style='text-align:right' data-bytes='{r[field]}'>"
        f"{html.escape(format_size(r[field]))}</td><td><code>{html.escape(_site(r))}</code></td>"
        "</tr>" for r in rows)
    return (f"<p><b>{html.escape(title)}</b></p><table class='memlens-sites'>"
            f"<tr><th>bytes</th><th>allocated at</th></tr>{body}</table>")


def render(capture, *, leaks=False, height=600):
    """The magic's output for a capture: the cell's figures and its report, as HTML text."""
    summary = _cli.json_output("summary", capture, "--limit", str(_ROWS))
    totals = summary["totals"]
    with tempfile.TemporaryDirectory(prefix="memlens-notebook-") as directory:
        page_path = os.path.join(directory, "report.html")
        _cli.output("report", capture, "-o", page_path)
        with open(page_path, encoding="utf-8", errors="surrogateescape") as page:
            report = page.read()
    if leaks:
        report = report.replace("</body>", _SHOW_IN_USE + "</body>", 1)
    peak, in_use = totals["peak_bytes"], totals["in_use_at_exit_bytes"]
    header = (
        "<div class='memlens-cell'>"
        f"<p>memlens: the cell's peak was <b data-bytes='{peak}'>{format_size(peak)}</b> "
        f"({peak} bytes, {totals['peak_blocks']} blocks); it left "
        f"<b data-bytes='{in_use}'>{format_size(in_use)}</b> ({in_use} bytes, "
        f"{totals['in_use_at_exit_blocks']} blocks) in use; {totals['allocations']} "
        f"allocations of {format_size(totals['allocated_bytes'])} in all.</p>"
        + _table("In use at the peak", summary["top_peak"], "peak_bytes")
        + _table("Left in use by the cell (leaks)", summary["top_in_use_at_exit"],
                 "leaked_bytes"))
    frame = (f"<iframe srcdoc=\"{html.escape(report, quote=True)}\" sandbox=\"allow-scripts\" "
             f"style=\"width:100%;height:{int(height)}px;border:1px solid #ccc\" "
             "title=\"memlens report\"></iframe>")
    return header + frame + "</div>"


@magics_class
class MemlensMagics(Magics):
    def _run(self, cell):
        """Runs the cell in the notebook's namespace as IPython would (its syntax transformed,
        its source kept for tracebacks), a blank line first so that its lines are numbered as
        the notebook shows them (the %%memlens line is line 1). Not through a nested run_cell,
        which would take the magic's result for its own."""
        shell = self.shell
        code = "\n" + shell.transform_cell(cell)
        filename = shell.compile.cache(code, shell.execution_count, raw_code="\n" + cell)
        try:
            exec(compile(code, filename, "exec"), shell.user_global_ns, shell.user_ns)
        except Exception:
            shell.showtraceback()

    @magic_arguments()
    @argument("--native", dest="native", action="store_true", default=True,
              help="record malloc, mmap and C++ new as well as Python's allocator (default)")
    @argument("--no-native", dest="native", action="store_false",
              help="record Python's allocator only")
    @argument("--leaks", action="store_true",
              help="open the flame graph on what the cell left in use")
    @argument("--sample-rate", type=int, default=None,
              help="sample one byte in N, e.g. 524288 as memlens run --sample (estimates; "
                   "default: every allocation)")
    @argument("--python-frames", type=int, default=None,
              help="Python frames kept per stack")
    @argument("-o", "--output", default=None,
              help="keep the capture at this path (default: deleted after the report)")
    @argument("--height", type=int, default=600, help="the report's height in pixels")
    @cell_magic
    def memlens(self, line, cell):
        """Runs the cell under memlens and shows its peak, leaks and flame graph."""
        args = parse_argstring(self.memlens, line)
        with tempfile.TemporaryDirectory(prefix="memlens-cell-") as directory:
            capture = args.output or os.path.join(directory, "cell.mlens")
            gc.collect()  # garbage made before the cell is not freed inside its span
            tracker = memlens.Tracker(capture, native=args.native, sample_rate=args.sample_rate,
                                      python_frames=args.python_frames)
            tracker.start()
            try:
                self._run(cell)
                gc.collect()  # cycles are garbage, not memory the cell kept
            finally:
                capture = tracker.stop()
            return HTML(render(capture, leaks=args.leaks, height=args.height))


def load_ipython_extension(ipython):
    ipython.register_magics(MemlensMagics)
