"""Sizes as the in-process tools read and write them: the pytest plugin's markers take
pytest-memray's grammar, the plugin and the notebook magic print human sizes."""
import re

_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([KMGTP]?B)", re.IGNORECASE)
_UNITS = {"B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4, "PB": 5}


def parse_size(text):
    """Bytes in a size written "<NUMBER> ([KMGTP]B|B)" (pytest-memray's grammar; 1 KB = 1024 B,
    units in either case, spaces optional). Raises ValueError saying what is expected."""
    match = _SIZE.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ValueError(f"memlens: invalid size {text!r}: expected <NUMBER> <UNIT> with UNIT one "
                         "of B, KB, MB, GB, TB, PB (1 KB = 1024 B), e.g. \"24 MB\"")
    return int(float(match.group(1)) * 1024 ** _UNITS[match.group(2).upper()])


def format_size(count):
    """1536 -> '1.5 KiB'; exact below 1 KiB."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
