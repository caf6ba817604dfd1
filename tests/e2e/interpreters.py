"""The interpreters the Python end-to-end tests run under (issue 26): the tests' own Python
(MEMLENS_TEST_PYTHON: the one CMake built the first hooks for; else the one running pytest) and
every finished build of tools/build-pythons under ${MEMLENS_PYTHONS_DIR:-~/.cache/memlens/pythons}
(<tag>/bin/python<version>, finished when <tag>/.memlens-complete exists).

MEMLENS_TEST_PYTHONS (executables, space-separated) replaces that list: ctest runs the suite once
per interpreter with it. MEMLENS_REQUIRE_PYTHONS (tags, e.g. "3.13 3.13t 3.14 3.14t") names the
builds that must be there: CI sets it, and test_interpreters.py fails when one is missing."""
import dataclasses
import functools
import os
import pathlib
import subprocess
import sys

TESTS_PYTHON = os.environ.get("MEMLENS_TEST_PYTHON", sys.executable)
CACHE = pathlib.Path(os.environ.get("MEMLENS_PYTHONS_DIR") or
                     pathlib.Path.home() / ".cache" / "memlens" / "pythons")
REQUIRED = os.environ.get("MEMLENS_REQUIRE_PYTHONS", "").split()

_DESCRIBE = ("import sys, sysconfig; print(*sys.version_info[:2], "
             "int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))")


@dataclasses.dataclass(frozen=True)
class Interpreter:
    """An interpreter under test. It stands for its executable wherever a path does (command
    lines, os.fsencode) and in f-strings."""
    executable: str
    version: tuple  # (3, 13)
    free_threaded: bool

    @property
    def tag(self):
        """"3.11", "3.13t": the name of its hooks (libmemlens_python<tag>.so) and of its build."""
        return "%d.%d%s" % (*self.version, "t" if self.free_threaded else "")

    def __fspath__(self):
        return self.executable

    def __str__(self):
        return self.executable

    def output(self, code, env=None):
        """What `python -c code` prints: figures that differ between interpreters are asked of
        the interpreter under test, never written down per version."""
        return subprocess.run([self.executable, "-c", code], capture_output=True, text=True,
                              check=True, timeout=60, env=env).stdout

    @functools.lru_cache(maxsize=None)
    def size_of(self, expression):
        """sys.getsizeof(expression) in this interpreter."""
        return int(self.output(f"import sys; print(sys.getsizeof({expression}))"))

    @functools.lru_cache(maxsize=None)
    def has_module(self, name):
        return subprocess.run([self.executable, "-c", f"import {name}"], capture_output=True,
                              timeout=60).returncode == 0


@functools.lru_cache(maxsize=None)
def describe(executable):
    major, minor, free_threaded = map(int, subprocess.run(
        [executable, "-c", _DESCRIBE], capture_output=True, text=True, check=True,
        timeout=60).stdout.split())
    return Interpreter(str(executable), (major, minor), bool(free_threaded))


def finished_builds():
    """{tag: executable} of tools/build-pythons' finished builds."""
    if not CACHE.is_dir():
        return {}
    return {folder.name: folder / "bin" / f"python{folder.name.rstrip('t')}"
            for folder in sorted(CACHE.iterdir()) if (folder / ".memlens-complete").is_file()}


def under_test():
    """The interpreters to run every Python test under, the tests' own first, one per tag."""
    chosen = os.environ.get("MEMLENS_TEST_PYTHONS", "").split()
    executables = chosen or [TESTS_PYTHON, *finished_builds().values()]
    found = {}
    for executable in executables:
        interpreter = describe(executable)
        found.setdefault(interpreter.tag, interpreter)
    return list(found.values())
