#!/usr/bin/env python3
"""False leak failures of the pytest plugin on a real suite (docs/pytest.md, "Measurement").

Downloads a project's sdist from PyPI (pip download: default more-itertools 10.5.0, whose sdist
holds its tests), puts `limit_leaks(LIMIT)` on every test with a conftest.py, and runs its suite
under `pytest --memlens` with each part of the leak-noise design switched off in turn:

  raw        every block allocated in the span and live at its end is a leak
  gc         + the full collections before and after the span
  design     + the runtime's suppressions and pytest's in-flight stacks (the plugin as shipped)

A test that passes without memlens and fails its limit is a false failure; the table counts
them. Each run takes minutes (every test is recorded and analysed).

    python3 bench/pytest_leak_noise.py [--project more-itertools==10.5.0] [--limit "1 KB"]
                                       [--build-dir build] [--work DIR]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]

# The conftest the suite runs with: the plugin as shipped, less what MEMLENS_NOISE switches off.
CONFTEST = '''
import os
import pytest
import memlens.pytest_plugin as plugin

off = set(filter(None, os.environ.get("MEMLENS_NOISE", "").split(",")))
if "nosupp" in off:
    plugin.RUNTIME_SUPPRESSIONS = ()
if "nogc" in off:
    plugin.gc = type("NoCollection", (), {"collect": staticmethod(lambda: 0)})
if "norunner" in off:
    kept = plugin._leaking_stacks

    def every_stack(cli, capture, extra):
        saved, plugin._is_runner = plugin._is_runner, lambda frame: False
        try:
            return kept(cli, capture, extra)
        finally:
            plugin._is_runner = saved
    plugin._leaking_stacks = every_stack


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.limit_leaks(os.environ["LEAK_LIMIT"]))
'''
MODES = [("raw", "nogc,nosupp,norunner"), ("gc", "nosupp,norunner"), ("design", "")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="more-itertools==10.5.0")
    parser.add_argument("--limit", default="1 KB")
    parser.add_argument("--build-dir", default=str(REPO / "build"))
    parser.add_argument("--work", default=None, help="where to unpack (default: a temporary "
                        "directory)")
    args = parser.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="memlens-leak-noise-"))
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--no-binary", ":all:", args.project, "-d", str(work)], check=True)
    sdist = next(work.glob("*.tar.gz"))
    with tarfile.open(sdist) as archive:
        archive.extractall(work, filter="data")
    source = next(p for p in work.iterdir() if p.is_dir())
    (source / "conftest.py").write_text(CONFTEST)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src" / "python"),
               MEMLENS_BUILD_DIR=str(pathlib.Path(args.build_dir).resolve()),
               LEAK_LIMIT=args.limit)
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "--noconftest"], cwd=source, env=env, capture_output=True, text=True)
    print(f"{args.project} without memlens: {plain.stdout.strip().splitlines()[-1]}")
    for name, off in MODES:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-p", "memlens.pytest_plugin", "--memlens", "-rf"],
                              cwd=source, env={**env, "MEMLENS_NOISE": off},
                              capture_output=True, text=True)
        (work / f"{name}.txt").write_text(done.stdout + done.stderr)
        failed = len(re.findall(r"^FAILED ", done.stdout, re.M))
        print(f"{name:7} {failed:4d} tests failed their limit_leaks({args.limit!r}); "
              f"output in {work / (name + '.txt')}")


if __name__ == "__main__":
    main()
