"""What summary says about the capture itself: still being written, its command line as a shell
reads it back; and an index that is not the capture's is never used."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, memlens, record_killed


def summary_json(capture, index=True):
    env = dict(os.environ)
    env.pop("MEMLENS_INDEX", None)
    if not index:
        env["MEMLENS_INDEX"] = "0"
    out = memlens("summary", capture, "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    return data, data["capture"]["snapshot"].pop("from_checkpoint_seq")


def duration_line(capture):
    out = memlens("summary", capture)
    assert out.returncode == 0, out.stderr
    return next(line for line in out.stdout.splitlines() if line.startswith("  duration"))


@pytest.mark.parametrize("hosted", [True, False], ids=["hosted", "in-process"])
def test_a_capture_being_written_is_still_recording_and_then_killed(tmp_path, hosted):
    """While the program runs, the capture says "still recording". Killed, the program leaves a
    whole capture when memlens run hosts the writer (it ends it with the signal), and one that
    says it did not finish when the writer was in the program (MEMLENS_HOSTED_WRITER=0)."""
    capture = tmp_path / "live.mlens"
    seen = {}

    def while_running():
        seen["line"] = duration_line(capture)
        seen["warnings"] = summary_json(capture, index=False)[0]["capture"]["warnings"]

    record_killed(capture, before_kill=while_running,
                  env=None if hosted else {"MEMLENS_HOSTED_WRITER": "0"})
    assert seen["line"].endswith("   (still recording)")
    assert [w for w in seen["warnings"] if w.startswith("the program is still recording: ")]
    assert not [w for w in seen["warnings"] if "killed" in w]
    if hosted:
        summary = summary_json(capture)[0]["capture"]
        assert summary["complete"] and summary["end_reason"] == "signal", summary
        assert "(recording incomplete)" not in duration_line(capture)
        return
    assert duration_line(capture).endswith("   (recording incomplete)")
    warnings = summary_json(capture)[0]["capture"]["warnings"]
    assert [w for w in warnings if w.startswith("the recording did not finish (the program was "
                                                "killed or the capture was cut short)")]


def test_summary_quotes_the_command_line_as_a_shell_reads_it(tmp_path):
    args = ["a b", "it's", "", "[x]", "$HOME", "tab\there", "*", "plain", "é"]
    capture = tmp_path / "quoted.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--",
                           str(PROGRAMS / "print_args"), *args], capture_output=True, timeout=60)
    assert proc.returncode == 3
    out = memlens("summary", capture)
    line = next(l for l in out.stdout.splitlines() if l.startswith("  command"))
    command = line[len("  command"):].strip().rsplit("   (pid ", 1)[0]
    assert command.startswith(str(PROGRAMS / "print_args") + " 'a b' 'it'\\''s' '' '[x]' '$HOME' ")
    # bash reads it back into exactly the program's argv.
    words = subprocess.run(["bash", "-c", 'eval "set -- $1"; printf "%s\\0" "$@"', "_", command],
                           capture_output=True, text=True, timeout=30).stdout
    assert words.split("\0")[:-1] == [str(PROGRAMS / "print_args"), *args]


def record(capture, program, *extra, env=None):
    proc = subprocess.run([str(MEMLENS), "run", *extra, "-o", str(capture), "--", str(program)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr


def test_recording_again_removes_the_old_index(tmp_path):
    capture = tmp_path / "again.mlens"
    index = tmp_path / "again.mlens.index"
    record(capture, PROGRAMS / "threads8")
    assert index.exists()
    record(capture, PROGRAMS / "known_peak", "--no-index")
    assert not index.exists()
    record(capture, PROGRAMS / "threads8")
    assert index.exists()
    # The agent alone, loaded by LD_PRELOAD, does the same.
    env = dict(os.environ, LD_PRELOAD=str(BUILD / "lib" / "libmemlens.so"),
               MEMLENS_OUTPUT=str(capture))
    subprocess.run([str(PROGRAMS / "known_peak")], env=env, check=True, timeout=60,
                   capture_output=True)
    assert not index.exists()
    data, from_index = summary_json(capture)
    assert data["process"]["argv"] == [str(PROGRAMS / "known_peak")] and from_index == 0


def test_an_index_made_for_another_capture_is_never_used(tmp_path):
    """Another capture's index whose header names this capture's size and mtime (a capture
    recorded again in the same clock tick, or copied with its times): its state is not this
    capture's, and no view may start from it."""
    other, capture = tmp_path / "other.mlens", tmp_path / "this.mlens"
    record(other, PROGRAMS / "threads8")
    record(capture, PROGRAMS / "known_peak")
    expected, _ = summary_json(capture, index=False)
    own = (tmp_path / "this.mlens.index").read_bytes()
    foreign = bytearray((tmp_path / "other.mlens.index").read_bytes())
    foreign[16:32] = own[16:32]  # the capture's size and mtime
    (tmp_path / "this.mlens.index").write_bytes(bytes(foreign))
    os.utime(capture, ns=(os.stat(capture).st_atime_ns, int.from_bytes(own[24:32], "little")))
    got, from_index = summary_json(capture)
    assert from_index == 0
    assert got == expected
