"""memlens: a memory profiler for C, C++ and Python programs on Linux.

Run a program under it with `python3 -m memlens run script.py` (or `memlens run -- CMD`), then
ask the capture questions: `memlens summary CAPTURE`, `top`, `tree`, `leaks`. This package holds
the `memlens` executable and the agent it preloads into the profiled program; see README.md.

A program can also talk to memlens (no-ops when it is not being recorded; memlens/api.py,
docs/api.md): memlens.Heap(name) for its own pools, memlens.marker(name),
memlens.snapshot(name), `with memlens.region(name):`.

It can also record spans of itself without `memlens run` (memlens/tracker.py, docs/api.md):
`with memlens.Tracker("x.mlens"): ...`, or memlens.start() ... memlens.stop().
"""
import os
import pathlib

from memlens.api import Heap, is_recording, marker, region, snapshot
from memlens.tracker import Tracker, start, stop

# The one place the version is kept: CMakeLists.txt and pyproject.toml read it from here.
__version__ = "0.1.0"


def executable() -> pathlib.Path:
    """The memlens command: inside the installed package, or in a build tree during development
    (MEMLENS_BUILD_DIR, or build/ at the top of the source tree)."""
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here / "bin" / "memlens"]
    if os.environ.get("MEMLENS_BUILD_DIR"):
        candidates.insert(0, pathlib.Path(os.environ["MEMLENS_BUILD_DIR"]) / "bin" / "memlens")
    candidates.append(here.parents[2] / "build" / "bin" / "memlens")
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("memlens: the memlens executable is not installed next to this "
                            "package (reinstall with `pip install .`)")
