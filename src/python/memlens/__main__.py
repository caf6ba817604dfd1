"""`python3 -m memlens ...`: the memlens command line, run from Python.

    python3 -m memlens run [-o FILE] [--sample | --sample-rate BYTES] script.py ARGS...
    python3 -m memlens run [-o FILE] [--sample | --sample-rate BYTES] -m package ARGS...
    python3 -m memlens summary|top|tree|leaks CAPTURE ...

`run` records this same interpreter (sys.executable) running the script or module, exactly as
`python3 script.py` would: sys.argv, the exit status, stdin/stdout/stderr are the program's.
Every other command goes to the memlens executable as it is.
"""
import os
import sys

from memlens import executable

USAGE = """usage: python3 -m memlens run [-o FILE] [--python-frames N] [--sample | --sample-rate BYTES]
                                 [--no-index] script.py [ARGS...]
       python3 -m memlens run [OPTIONS] -m module [ARGS...]
       python3 -m memlens summary|top|tree|leaks CAPTURE [OPTIONS]   (see --help)"""


def run_command(args):
    """memlens `run` arguments for running a Python program with this interpreter."""
    options = []
    while args and args[0] in ("-o", "--output", "--python-frames", "--sample-rate", "--sample",
                               "--no-index"):
        if args[0] in ("--sample", "--no-index"):  # flags (docs/sampling.md, docs/snapshot-index.md)
            options.append(args.pop(0))
            continue
        if len(args) < 2:
            sys.exit(f"memlens: run: {args[0]} needs a value\n" + USAGE)
        options += [args[0], args[1]]
        args = args[2:]
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        sys.exit("memlens: run: no script given\n" + USAGE)
    if args[0] == "-m":
        if len(args) < 2:
            sys.exit("memlens: run: -m needs a module name\n" + USAGE)
        program = [sys.executable, "-m", args[1]] + args[2:]
    else:
        if not os.path.exists(args[0]):
            sys.exit(f"memlens: run: cannot open '{args[0]}': No such file or directory")
        program = [sys.executable] + args
    return ["run"] + options + ["--"] + program


def main():
    args = sys.argv[1:]
    if args[:1] == ["run"]:
        args = run_command(args[1:])
    elif not args:
        sys.exit(USAGE)
    try:
        binary = str(executable())
    except FileNotFoundError as error:
        sys.exit(str(error))
    os.execv(binary, [binary] + args)


if __name__ == "__main__":
    main()
