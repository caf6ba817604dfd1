"""MEMLENS_TRACKED, the mark a recording agent leaves in its environment: "PID:START", the
recorded process's pid and start time (field 22 of /proc/PID/stat). The recorded process's own
new image after an exec has both and appends to its capture; a process with its pid but another
start time is a descendant that was given the pid again after the recorded process exited, and
must not (docs/agent.md, "One process records").

A pid cannot be made to be used again on demand, so the tests make the other half of it: a
shell that records execs a program with the mark changed to its own pid and a start time that
is not its own, which is what a descendant given the recorded pid finds."""
import json
import os
import subprocess

import pytest

from conftest import MEMLENS, PROGRAMS, Recorded, memlens

IN_PROCESS = {"hosted": {}, "in-process": {"MEMLENS_HOSTED_WRITER": "0"}}


def run_shell(tmp_path, script, how, follow=False):
    """`memlens run [--follow-children] -o OUT -- sh -c SCRIPT`; returns (proc, OUT)."""
    out = tmp_path / ("run" if follow else "sh.mlens")
    env = {**os.environ, **IN_PROCESS[how]}
    proc = subprocess.run([str(MEMLENS), "run", *(["--follow-children"] if follow else []),
                           "-o", str(out), "--", "sh", "-c", script],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    return proc, out


def start_ticks(stat):
    return int(stat[stat.rindex(")") + 2:].split()[19])


def reused_pid_script(start):
    """Execs `spawns child 5` (500 bytes at @child_block) with the mark naming the shell's pid
    and `start` (a shell expression)."""
    return f'export MEMLENS_TRACKED="$${start}"; exec \'{PROGRAMS / "spawns"}\' child 5'


@pytest.mark.parametrize("how", IN_PROCESS)
def test_the_mark_names_the_recorded_pid_and_its_start_time(tmp_path, how):
    proc, _ = run_shell(tmp_path, 'echo "$MEMLENS_TRACKED"; cat /proc/$$/stat', how)
    assert proc.returncode == 0, proc.stderr
    mark, stat = proc.stdout.splitlines()
    assert mark == f"{stat.split()[0]}:{start_ticks(stat)}"


@pytest.mark.parametrize("how", IN_PROCESS)
def test_the_recorded_pid_with_another_start_time_does_not_append(tmp_path, how):
    """Not following children: the program the shell execs is taken for a descendant and stays
    passive; the capture ends with the shell, as if it had exited there."""
    proc, capture = run_shell(tmp_path, reused_pid_script(":1"), how)
    assert proc.returncode == 0, proc.stderr
    r = Recorded(proc, capture)
    summary = r.analyze("summary")
    assert summary["process"]["argv"][:2] == ["sh", "-c"]
    assert summary["process"]["earlier_images"] == []
    assert r.rows_at("spawns.c", "child_block") == []


@pytest.mark.parametrize("how", IN_PROCESS)
def test_the_recorded_pid_with_another_start_time_records_as_a_followed_descendant(tmp_path,
                                                                                   how):
    """Following children: it records into a capture of its own, under the shell whose pid it
    has (its recorded parent), and the shell's capture holds none of it."""
    proc, run = run_shell(tmp_path, reused_pid_script(":1"), how, follow=True)
    assert proc.returncode == 0, proc.stderr
    out = memlens("summary", run, "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["processes"]
    assert len(rows) == 2, rows
    shell, child = rows
    assert shell["argv"][:2] == ["sh", "-c"] and shell["depth"] == 0
    assert child["argv"][1:] == ["child", "5"] and not child["forked"]
    assert child["pid"] == shell["pid"] == child["recorded_parent"]
    assert child["parent_capture"] == shell["capture"] and child["depth"] == 1
    assert child["capture"].endswith(f"/spawns-{child['pid']}.mlens")
    assert Recorded(None, child["capture"]).row_at("spawns.c", "child_block")["leaked_bytes"] == 500
    assert Recorded(None, shell["capture"]).rows_at("spawns.c", "child_block") == []


@pytest.mark.parametrize("how", IN_PROCESS)
def test_a_bare_pid_of_an_earlier_agent_still_appends(tmp_path, how):
    """The mark earlier agents wrote, the pid alone: equal to the process's own, it is the
    recorded process's new image, as before."""
    proc, capture = run_shell(tmp_path, reused_pid_script(""), how)
    assert proc.returncode == 0, proc.stderr
    r = Recorded(proc, capture)
    summary = r.analyze("summary")
    assert summary["process"]["argv"][1:] == ["child", "5"]
    assert [image[:2] for image in summary["process"]["earlier_images"]] == [["sh", "-c"]]
    assert r.row_at("spawns.c", "child_block")["leaked_bytes"] == 500


@pytest.mark.parametrize("how", IN_PROCESS)
def test_a_forked_childs_exec_appends_to_its_own_capture(tmp_path, how):
    """A subshell (a child forked while the shell records) whose writer has started (it forked
    in turn) execs a program: the exec is given the subshell's own mark, pid and start time, not
    the shell's, and the program appends to the subshell's capture."""
    spawns = PROGRAMS / "spawns"
    proc, run = run_shell(tmp_path, f"( (true); exec '{spawns}' child 4 ); true", how,
                          follow=True)
    assert proc.returncode == 0, proc.stderr
    out = memlens("summary", run, "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["processes"]
    shell = rows[0]
    assert shell["argv"][:2] == ["sh", "-c"] and shell["depth"] == 0
    execd = [r for r in rows if r["argv"][1:] == ["child", "4"]]
    assert len(execd) == 1, rows
    assert execd[0]["forked"] and execd[0]["parent_capture"] == shell["capture"]
    assert Recorded(None, execd[0]["capture"]).row_at("spawns.c", "child_block")["leaked_bytes"] == 400
    assert not [p for p in run.iterdir() if p.name.endswith("-2.mlens")]
