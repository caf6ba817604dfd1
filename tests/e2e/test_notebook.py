"""The `%%memlens` cell magic (src/python/memlens/notebook.py, docs/notebook.md) run through
IPython's own shell, without a browser: the HTML object it returns holds the cell's exact peak,
the line that allocated it, and the report page in an iframe of its own."""
import html
import json
import os
import subprocess

import pytest

from conftest import BUILD, REPO, memlens
from lent_packages import lend

# Runs cells in IPython's shell as a notebook would and prints what the magic returned.
_DRIVER = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "memlens")
out = shell.run_cell(sys.argv[1])
assert out.success, out
print(json.dumps({"type": type(out.result).__module__ + "." + type(out.result).__name__,
                  "html": out.result.data, "kept": len(shell.user_ns["keep"])}))
"""


@pytest.fixture(scope="session")
def ipython_path(tmp_path_factory):
    """IPython for the interpreters that have none (lent_packages.py)."""
    return lend(tmp_path_factory.mktemp("ipython-packages"), "ipython")


@pytest.fixture
def run_cell(tmp_path, python, ipython_path):
    """run_cell(cell) -> what the magic returned for the cell, run by IPython's shell under the
    interpreter under test."""
    def run(cell):
        env = dict(os.environ, MEMLENS_BUILD_DIR=str(BUILD),
                   PYTHONPATH=os.pathsep.join([str(REPO / "src" / "python"), str(ipython_path)]))
        done = subprocess.run([str(python), "-c", _DRIVER, cell], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=300)
        assert done.returncode == 0, done.stderr + done.stdout
        return json.loads(done.stdout.splitlines()[-1])
    return run


def test_the_magic_shows_the_cells_peak_and_line(run_cell, python, tmp_path):
    shown = run_cell("%%memlens -o cell.mlens\n"
                               "temporary = bytearray(3_000_000)\n"
                               "del temporary\n"
                               "keep = bytearray(1_000_000)\n")
    assert shown["type"] == "IPython.core.display.HTML"
    assert shown["kept"] == 1_000_000  # the cell ran in the notebook's namespace
    page = shown["html"]
    summary = json.loads(memlens("summary", tmp_path / "cell.mlens", "--json").stdout)
    peak = summary["totals"]["peak_bytes"]
    assert 3_000_001 <= peak < 3_000_001 + 64 * 1024
    assert f"<b data-bytes='{peak}'>" in page  # the cell's peak, exact
    # The lines as the notebook numbers them: the %%memlens line is line 1.
    site = summary["top_peak"][0]["site"]
    assert site["line"] == 2 and site["file"].startswith("<ipython-input-"), site
    # bytearray(n): an object of sys.getsizeof(bytearray()) bytes and a buffer of n + 1.
    header = python.size_of("bytearray()")
    assert summary["top_peak"][0]["peak_bytes"] == 3_000_001 + header
    assert (f"<td style='text-align:right' data-bytes='{3_000_001 + header}'>2.9 MiB</td><td>"
            f"<code>{html.escape(site['file'])}:2 (&lt;module&gt;)</code>") in page
    leaked = summary["top_in_use_at_exit"][0]
    assert (leaked["site"]["line"], leaked["leaked_bytes"]) == (4, 1_000_001 + header)
    assert (f"data-bytes='{1_000_001 + header}'>976.6 KiB</td><td><code>"
            f"{html.escape(site['file'])}:4 (&lt;module&gt;)") in page
    # The report: the whole page inside a sandboxed iframe, its markup escaped into srcdoc.
    frame = page[page.index("<iframe"):]
    assert frame.startswith('<iframe srcdoc="&lt;!DOCTYPE html&gt;') and 'sandbox="allow-scripts"' in frame
    assert "<script" not in frame and "flame-tabs" in frame


def test_leaks_opens_the_flame_graph_on_what_the_cell_kept(run_cell):
    shown = run_cell("%%memlens --leaks --no-native\nkeep = [0] * 100_000\n")
    frame = shown["html"][shown["html"].index("<iframe"):]
    assert html.escape("""querySelector('#flame-tabs [data-tree="in_use"]')""") in frame
