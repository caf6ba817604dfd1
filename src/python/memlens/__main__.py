"""`python3 -m memlens ...`: the memlens command line, run from Python.

    python3 -m memlens run [OPTIONS] script.py ARGS...
    python3 -m memlens run [OPTIONS] -m package ARGS...
    python3 -m memlens summary|top|tree|leaks CAPTURE ...

`run` records this same interpreter (sys.executable) running the script or module, exactly as
`python3 script.py` would: sys.argv, the exit status, stdin/stdout/stderr are the program's.
`run`'s OPTIONS are the memlens executable's own (`memlens run --help`): the package keeps no
list of them, it asks the executable (`memlens run --list-options`). Every other command goes to
the memlens executable as it is.
"""
import os
import subprocess
import sys

from memlens import executable


def run_options(binary):
    """{name: value name, or None for a flag} for every option of the executable's `run`."""
    listing = subprocess.run([binary, "run", "--list-options"], stdout=subprocess.PIPE,
                             check=True, text=True).stdout
    options = {}
    for line in listing.splitlines():
        names, value = line.split("\t")
        for name in names.split(","):
            options[name] = value or None
    return options


def usage(options):
    """The wrapper's usage, its options in the executable's words."""
    described = []
    for name, value in options.items():
        if name not in ("-h", "--help"):
            described.append(f"[{name} {value}]" if value else f"[{name}]")
    lines, line = [], "usage: python3 -m memlens run"
    for word in described + ["script.py [ARGS...]"]:
        if len(line) + 1 + len(word) > 100:
            lines.append(line)
            line = " " * len("usage: python3 -m memlens run")
        line += " " + word
    lines.append(line)
    lines += ["       python3 -m memlens run [OPTIONS] -m module [ARGS...]",
              "       python3 -m memlens run --help",
              "       python3 -m memlens summary|top|tree|leaks CAPTURE [OPTIONS]   (see --help)"]
    return "\n".join(lines)


def run_command(args, options):
    """memlens `run` arguments for running a Python program with this interpreter. memlens's
    options come first; the first word that is not one (or `--`) is the script, or `-m`."""
    mine = []
    while args and args[0].startswith("-") and args[0] not in ("-", "--", "-m"):
        word = args.pop(0)
        if word in ("-h", "--help"):
            return ["run", "--help"]
        # "--output=FILE" and "-oFILE" carry their value; "--output FILE" takes the next word.
        long_name = word.startswith("--")
        name = word.split("=", 1)[0] if long_name else word[:2]
        attached = "=" in word if long_name else len(word) > 2
        mine.append(word)
        if name not in options:
            # The executable says "unknown option" in its own words.
            return ["run"] + mine
        if options[name] and not attached:
            if not args:
                sys.exit(f"memlens: run: {word} needs a value\n" + usage(options))
            mine.append(args.pop(0))
    if args and args[0] == "--":
        args = args[1:]
    if not args:
        sys.exit("memlens: run: no script given\n" + usage(options))
    if args[0] == "-m":
        if len(args) < 2:
            sys.exit("memlens: run: -m needs a module name\n" + usage(options))
        program = [sys.executable, "-m", args[1]] + args[2:]
    else:
        if not os.path.exists(args[0]):
            sys.exit(f"memlens: run: cannot open '{args[0]}': No such file or directory")
        program = [sys.executable] + args
    return ["run"] + mine + ["--"] + program


def main():
    args = sys.argv[1:]
    try:
        binary = str(executable())
    except FileNotFoundError as error:
        sys.exit(str(error))
    if not args:
        sys.exit(usage(run_options(binary)))
    if args[0] == "run":
        args = run_command(args[1:], run_options(binary))
    os.execv(binary, [binary] + args)


if __name__ == "__main__":
    main()
