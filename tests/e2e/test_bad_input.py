"""Bad input gets one clear line on stderr and a non-zero exit, never a crash or a trace."""
import os
import re

import pytest

from conftest import MEMLENS, PROGRAMS, REPO, memlens


def assert_clean_failure(proc, *fragments):
    assert proc.returncode != 0
    assert proc.returncode < 128, "memlens must not die of a signal"
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert lines and lines[0].startswith("memlens: "), proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "terminate called" not in proc.stderr


def test_program_that_does_not_exist(tmp_path):
    proc = memlens("run", "-o", tmp_path / "x.mlens", "--", "/does/not/exist")
    assert_clean_failure(proc, "cannot run '/does/not/exist'", "No such file")
    proc = memlens("run", "--", "no-such-command-anywhere")
    assert_clean_failure(proc, "not found in PATH")


def test_run_without_a_program():
    assert_clean_failure(memlens("run"), "run")


@pytest.mark.parametrize("command", ["summary", "top", "tree", "leaks"])
def test_missing_capture(command, tmp_path):
    assert_clean_failure(memlens(command, tmp_path / "nothing.mlens"), "cannot open", "No such file")


# The format's major version, as the reader knows it, and the oldest it still reads: every
# earlier one is refused by name.
RECORDS_H = (REPO / "src/format/records.h").read_text()
FORMAT_MAJOR = int(re.search(r"kFormatMajor = (\d+);", RECORDS_H).group(1))
OLDEST_MAJOR = int(re.search(r"kOldestReadableMajor = (\d+);", RECORDS_H).group(1))


def header(major):
    return b"MLENSCAP" + bytes([major, 0, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("content, message", [
    (b"", "empty"),
    (os.urandom(4096), "not a memlens capture"),
    (header(99), "newer than this memlens reads"),
    *[(header(major), "older than this memlens reads") for major in range(1, OLDEST_MAJOR)],
    *[(header(major), "holds no recording") for major in range(OLDEST_MAJOR, FORMAT_MAJOR + 1)],
])
def test_unreadable_captures(tmp_path, content, message):
    path = tmp_path / "bad.mlens"
    path.write_bytes(content)
    for command in ["summary", "top", "tree", "leaks"]:
        assert_clean_failure(memlens(command, path), message)


def test_a_directory_is_not_a_capture(tmp_path):
    assert_clean_failure(memlens("summary", tmp_path), "is a directory")


def test_truncated_capture_is_read_up_to_the_damage(record, tmp_path):
    r = record("leak_two_paths")
    data = r.capture.read_bytes()
    for cut in [len(data) - 1, len(data) // 2]:
        path = tmp_path / f"cut{cut}.mlens"
        path.write_bytes(data[:cut])
        proc = memlens("summary", path, "--json")
        if proc.returncode == 0:  # the cut left at least the first chunk: a partial answer
            assert "truncated" in proc.stderr or "did not finish" in proc.stderr
        else:
            assert_clean_failure(proc, "holds no recording")


def test_corrupt_bytes_in_the_middle_never_crash(record, tmp_path):
    r = record("threads8")
    data = bytearray(r.capture.read_bytes())
    for offset in range(40, len(data), max(1, len(data) // 25)):
        damaged = bytearray(data)
        damaged[offset] ^= 0x5A
        path = tmp_path / "damaged.mlens"
        path.write_bytes(damaged)
        proc = memlens("summary", path)
        assert proc.returncode in (0, 2), proc.stderr
        assert proc.returncode == 2 or "corrupt" in proc.stderr or "truncated" in proc.stderr


@pytest.mark.parametrize("args, fragment", [
    (["summary", "--no-such-flag"], "--no-such-flag"),
    (["frobnicate"], "frobnicate"),
    (["top", "x.mlens", "--by", "color"], "--by"),
    (["top", "x.mlens", "--sort", "size"], "--sort"),
    (["tree", "x.mlens", "--min-percent", "300"], "--min-percent"),
])
def test_unknown_flags_and_values(args, fragment):
    assert_clean_failure(memlens(*args), fragment)


def test_help_explains_every_command():
    proc = memlens("--help")
    assert proc.returncode == 0
    for command in ["run", "summary", "top", "tree", "leaks"]:
        assert command in proc.stdout
    proc = memlens("top", "--help")
    assert proc.returncode == 0 and "--by" in proc.stdout and "--sort" in proc.stdout


def test_unwritable_output_is_refused_before_running():
    proc = memlens("run", "-o", "/proc/nope/capture.mlens", "--", PROGRAMS / "passthrough")
    assert_clean_failure(proc, "cannot write the capture")


def test_version_is_the_packages():
    """`memlens --version` is the Python package's __version__, the one place it is kept
    (CMakeLists.txt and pyproject.toml read it)."""
    text = (REPO / "src" / "python" / "memlens" / "__init__.py").read_text()
    version = re.search(r'^__version__ = "([0-9.]+)"$', text, re.M).group(1)
    proc = memlens("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == version
