"""The memlens executable's views, asked from Python: the in-process tools (Tracker, the pytest
plugin, the notebook magic, memlens.tracemalloc) answer from the capture with the same views as
the command line, so there is one implementation of each figure."""
import json
import subprocess

from memlens import executable


class AnalyzerError(RuntimeError):
    """The memlens executable refused (a bad argument, a corrupt capture): its message."""


def output(*args):
    """What `memlens ARGS...` prints, as text. Raises AnalyzerError with memlens's own message
    when it exits non-zero."""
    done = subprocess.run([str(executable()), *map(str, args)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise AnalyzerError(done.stderr.strip() or f"memlens {args[0]} failed ({done.returncode})")
    return done.stdout


def json_output(*args):
    """`memlens ARGS... --json`, parsed (the shapes: docs/json-output.md)."""
    return json.loads(output(*args, "--json"))
