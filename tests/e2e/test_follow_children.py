"""memlens run --follow-children: every process the program starts is recorded into a capture of
its own in the run's directory, linked to its parent; a forked one starts from the blocks it
inherited; `memlens summary DIR` lists them (docs/agent.md, "Processes")."""
import json
import os
import subprocess

import pytest

from conftest import BUILD, MEMLENS, PROGRAMS, Recorded, memlens


def run_following(tmp_path, *command, directory="run"):
    run = tmp_path / directory
    proc = subprocess.run([str(MEMLENS), "run", "--follow-children", "-o", str(run), "--",
                           *map(str, command)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    return proc, run


def processes(run, timeout=120):
    out = memlens("summary", run, "--json", timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_children_started_every_way_are_recorded_with_exact_figures(tmp_path):
    """50 fork+exec children, one posix_spawn, one through system(), one fork that runs no other
    program: each capture holds exactly the bytes its process leaked at its line, and names its
    parent; the forked one holds what it inherited too, less what it freed of it."""
    n = 50
    proc, run = run_following(tmp_path, PROGRAMS / "spawns", n)
    assert (proc.returncode, proc.stdout) == (0, f"spawned {n + 3}\n"), proc.stderr
    summary = processes(run)
    rows = summary["processes"]
    parent = next(r for r in rows if r["argv"][1:] == [str(n)])
    assert parent["depth"] == 0 and parent["parent_capture"] is None
    assert Recorded(None, parent["capture"]).row_at("spawns.c", "parent_block")["leaked_bytes"] == 1000
    assert Recorded(None, parent["capture"]).rows_at("spawns.c", "forked_only") == []
    assert Recorded(None, parent["capture"]).row_at("spawns.c", "lent_block")["leaked_bytes"] == 0
    forked = [r for r in rows if r["argv"][1:] == [str(n)] and r is not parent]
    assert len(forked) == 1, [r["argv"] for r in rows]
    forked = forked[0]
    assert forked["ppid"] == parent["pid"] and forked["parent_capture"] == parent["capture"]
    inherited = Recorded(None, forked["capture"])
    assert inherited.row_at("spawns.c", "forked_only")["leaked_bytes"] == 7777
    assert inherited.row_at("spawns.c", "parent_block")["leaked_bytes"] == 1000  # inherited
    assert inherited.rows_at("spawns.c", "lent_block") == [] or \
        inherited.row_at("spawns.c", "lent_block")["leaked_bytes"] == 0  # inherited, freed
    # In use at its exit: its 7777 and the 1000 it inherited; its peak, then, the same.
    assert (forked["totals"]["in_use_at_exit_bytes"], forked["totals"]["peak_bytes"],
            forked["totals"]["allocated_bytes"]) == (8777, 8777, 7777)
    children = {int(r["argv"][2]): r for r in rows if r["argv"][1:2] == ["child"]}
    assert sorted(children) == list(range(1, n + 3))
    for k, child in children.items():
        assert child["complete"], child
        got = Recorded(None, child["capture"]).row_at("spawns.c", "child_block")["leaked_bytes"]
        assert got == 100 * k, (k, child["capture"])
        if k <= n + 1:  # fork+exec and posix_spawn: the program is the parent
            assert child["parent_capture"] == parent["capture"] and child["ppid"] == parent["pid"]
        else:  # system(): a shell that forks it (dash) is recorded too, and is its parent; one
            # that execs it (bash) is the same process, its first image
            above = next(r for r in rows if r["capture"] == child["parent_capture"])
            assert parent["capture"] in (above["capture"], above["parent_capture"])
    # The program, its 53 children and the shell of system() when it forked; nothing else.
    assert len(rows) in (n + 4, n + 5) and summary["total"]["processes"] == len(rows)
    assert sorted(p.name for p in run.iterdir() if p.suffix == ".mlens") == sorted(
        os.path.basename(r["capture"]) for r in rows)
    leaked = sum(100 * k for k in children) + 1000 + 1000 + 7777
    assert summary["total"]["in_use_bytes"] >= leaked
    # The run as one, its processes merged by line: the children's blocks at their line add up,
    # and the parent's block is counted twice: in the parent, and in its forked copy.
    whole = Recorded(None, run)
    assert whole.row_at("spawns.c", "child_block")["leaked_bytes"] == sum(100 * k for k in children)
    assert whole.row_at("spawns.c", "parent_block")["leaked_bytes"] == 2000
    assert whole.row_at("spawns.c", "forked_only")["leaked_bytes"] == 7777
    assert whole.analyze("top")["capture"]["processes"] == len(rows)
    # The parent's own summary no longer says its children went unrecorded.
    assert Recorded(None, parent["capture"]).analyze("summary")["totals"].get("unrecorded_children", 0) == 0


def test_a_shell_pipeline_and_the_text_table(tmp_path):
    spawns = PROGRAMS / "spawns"
    proc, run = run_following(tmp_path, "sh", "-c", f"'{spawns}' child 3 | '{spawns}' child 5")
    assert proc.returncode == 0, proc.stderr
    assert f"captures of 3 processes written to {run}/" in proc.stderr  # each fork exec'd
    rows = processes(run)["processes"]
    shell = rows[0]
    assert shell["argv"][0] == "sh" and shell["depth"] == 0
    kids = sorted(rows[1:], key=lambda r: r["argv"][2])
    assert [(r["argv"][2], r["depth"], r["parent_capture"]) for r in kids] == [
        ("3", 1, shell["capture"]), ("5", 1, shell["capture"])]
    for r, k in zip(kids, (3, 5)):
        assert Recorded(None, r["capture"]).row_at("spawns.c", "child_block")["leaked_bytes"] == 100 * k
    text = memlens("summary", run)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"memlens summary of the run in {run}: 3 processes"
    assert any(line.rstrip().endswith(f"  {spawns} child 3") for line in lines), text.stdout
    assert any(line.startswith("  total") for line in lines), text.stdout


def test_a_subshells_child_and_an_execd_parent_keep_the_tree(tmp_path):
    """A subshell (a fork of the shell) is recorded, and the child it starts is under it; a
    shell that runs a child and then execs keeps the child under it, though its last image
    started after the child."""
    spawns = PROGRAMS / "spawns"
    proc, run = run_following(tmp_path, "sh", "-c",
                              f"('{spawns}' child 1; true); '{spawns}' child 2; "
                              f"exec '{spawns}' child 3")
    assert proc.returncode == 0, proc.stderr
    rows = processes(run)["processes"]
    assert len(rows) == 4, rows
    shell = rows[0]
    assert shell["argv"][1:] == ["child", "3"] and shell["depth"] == 0  # exec'd into child 3
    subshell = next(r for r in rows if r["forked"])
    assert subshell["argv"][0] == "sh" and subshell["parent_capture"] == shell["capture"]
    kids = {r["argv"][2]: r for r in rows if r["argv"][1:2] == ["child"] and r is not shell}
    assert sorted(kids) == ["1", "2"]
    assert kids["1"]["ppid"] == subshell["pid"] == kids["1"]["recorded_parent"]
    assert kids["1"]["parent_capture"] == subshell["capture"] and kids["1"]["depth"] == 2
    assert kids["2"]["parent_capture"] == shell["capture"] and kids["2"]["depth"] == 1
    text = memlens("summary", run).stdout.splitlines()
    assert sum("  (forked) sh -c " in line for line in text) == 1, text  # the subshell
    captures = {r["argv"][2]: Recorded(None, r["capture"]) for r in rows}
    for k in ("1", "2", "3"):
        assert captures[k].row_at("spawns.c", "child_block")["leaked_bytes"] == 100 * int(k)


def test_a_pid_used_again_never_empties_an_earlier_capture(tmp_path):
    """A descendant whose capture name is taken (a process of the run had its pid before)
    writes NAME-PID-2.mlens and leaves the earlier capture as it was. The shell's pid is the
    program's after its exec: the shell makes the taken name, then execs the program with the
    agent preloaded, as a followed descendant of pid 1."""
    run = tmp_path / "run"
    run.mkdir()
    agent = BUILD / "lib" / "libmemlens.so"
    script = (f'printf earlier > "{run}/spawns-$$.mlens"; echo $$; '
              f'LD_PRELOAD={agent} MEMLENS_TRACKED=1 MEMLENS_FOLLOW_CHILDREN={run} '
              f'exec {PROGRAMS / "spawns"} child 5')
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    pid = out.stdout.strip()
    assert (run / f"spawns-{pid}.mlens").read_text() == "earlier"
    later = Recorded(None, run / f"spawns-{pid}-2.mlens")
    assert later.row_at("spawns.c", "child_block")["leaked_bytes"] == 500


def test_a_python_program_and_its_python_child(tmp_path, python):
    """subprocess.run of another interpreter: the child's bytearray at its own line."""
    child = tmp_path / "child.py"
    child.write_text("import sys\nkept = bytearray(3_000_000)  # @kept\nsys.exit(0)\n")
    parent = tmp_path / "parent.py"
    parent.write_text("import subprocess, sys\n"
                      f"subprocess.run([sys.executable, {str(child)!r}], check=True)\n")
    proc, run = run_following(tmp_path, python, parent)
    assert proc.returncode == 0, proc.stderr
    rows = processes(run)["processes"]
    kid = next(r for r in rows if r["argv"][-1] == str(child))
    top = Recorded(None, kid["capture"]).analyze("top", "--by", "line", "--limit", "1000")["rows"]
    at = [r for r in top if r["site"]["file"] == str(child) and r["site"]["line"] == 2]
    assert len(at) == 1 and at[0]["leaked_bytes"] >= 3_000_000, at
    assert rows[0]["argv"][-1] == str(parent) and kid["depth"] >= 1


def test_bad_run_directories_are_refused(tmp_path):
    used = tmp_path / "used"
    used.mkdir()
    (used / "old.mlens").write_text("x")
    for target, message in ((used, "already holds captures"),
                            (tmp_path / "a%p", "give a path without %")):
        out = memlens("run", "--follow-children", "-o", target, "--", "true")
        assert out.returncode == 2 and message in out.stderr, out.stderr
        assert out.stdout == ""
    not_dir = tmp_path / "file"
    not_dir.write_text("")
    out = memlens("run", "--follow-children", "-o", not_dir, "--", "true")
    assert out.returncode == 2 and "is not a directory" in out.stderr, out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = memlens("summary", empty)
    assert out.returncode == 2 and "without captures" in out.stderr, out.stderr


def test_the_default_directory_is_named_after_the_program(tmp_path):
    out = subprocess.run([str(MEMLENS), "run", "--follow-children", "--", "true"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    made = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(made) == 1 and made[0].name.startswith("memlens-true-"), made
    pid = made[0].name.rsplit("-", 1)[1]
    captures = sorted(p.name for p in made[0].iterdir() if p.suffix == ".mlens")
    assert captures == [f"true-{pid}.mlens"]  # the program's (its index may lie beside it)


def test_views_take_the_run_or_say_they_read_one_process(tmp_path):
    """Every view takes the run's directory, its processes merged (the report too, with its
    process tree: tests/report); those that describe one process's own (its address space, its
    blocks, growth over its clock) say so and name the run."""
    proc, run = run_following(tmp_path, PROGRAMS / "spawns", 1)
    assert proc.returncode == 0, proc.stderr
    out = memlens("top", run)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"The run in {run}: its 6 processes merged, each at its own "
                                 f"moment (memlens summary {run} lists them)\n"), out.stdout
    for view, name in (("map", "map (an address space)"), ("blocks", "blocks (addresses)"),
                       ("leaks", "leaks --growth (one clock's checkpoints)")):
        out = memlens(view, run, *(["--growth"] if view == "leaks" else []))
        assert out.returncode == 2 and out.stdout == "", (view, out.stdout)
        assert out.stderr == (f"memlens: '{run}' holds a run of several processes; {name} reads "
                              f"one process's capture: name one of them (memlens summary {run} "
                              "lists them)\n"), out.stderr
    # A moment of one process's clock is not the run's; each process's own peak is.
    out = memlens("top", f"{run}@t=0.001s")
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert out.stderr.startswith("memlens: @t=0.001s names a moment of one process (its clock, "
                                 "its markers)"), out.stderr
    out = memlens("summary", f"{run}@peak")
    assert out.returncode == 0, out.stderr
    assert " AT @peak " in out.stdout.splitlines()[2], out.stdout


# A pool of 2 workers under memlens run --follow-children, by multiprocessing's start method:
# the module keeps 5 MB at line 2 (every process that imports it), each task n + 1 bytes at
# line 5 (a bytearray ends in a NUL). Returns the script and the run.
POOL = ("import multiprocessing as mp\n"
        "big = bytearray(5_000_000)  # @big\n"
        "kept = []\n"
        "def work(n):\n"
        "    kept.append(bytearray(n))  # @work\n"
        "    return n\n"
        "if __name__ == '__main__':\n"
        "    pool = mp.get_context({method!r}).Pool(2)\n"
        "    print(sum(pool.map(work, [1_000_000, 2_000_000, 3_000_000, 4_000_000], chunksize=1)))\n"
        "    pool.close()\n"
        "    pool.join()\n")


def run_pool(tmp_path, python, method):
    script = tmp_path / "pool.py"
    script.write_text(POOL.format(method=method))
    proc, run = run_following(tmp_path, python, script)
    assert (proc.returncode, proc.stdout) == (0, "10000000\n"), proc.stderr
    return script, run


def leaked_at(capture, script, line):
    """The bytes in use at exit at a line of the script, in a capture (or a run, merged)."""
    top = Recorded(None, capture).analyze("top", "--by", "line", "--limit", "100000")
    return sum(r["leaked_bytes"] for r in top["rows"]
               if r["site"]["file"] == str(script) and r["site"]["line"] == line)


def test_a_spawn_pools_workers_hold_what_their_tasks_kept(tmp_path, python):
    """multiprocessing's spawn method: the workers are interpreters of their own, recorded, under
    the program; the four tasks' bytearrays (kept by whichever worker ran each) add up, over the
    workers' captures, to exactly what the tasks asked for at the line that made them."""
    script, run = run_pool(tmp_path, python, "spawn")
    rows = processes(run)["processes"]
    program = rows[0]
    assert program["argv"][-1] == str(script)
    workers = [r for r in rows if any("multiprocessing.spawn" in a for a in r["argv"])]
    assert len(workers) == 2, [r["argv"] for r in rows]
    leaked = 0
    for worker in workers:
        assert worker["parent_capture"] == program["capture"] and worker["complete"], worker
        leaked += leaked_at(worker["capture"], script, 5)
    # Beside the buffers at that line, the four objects and the list of them growing: a few
    # hundred bytes.
    assert 10_000_004 < leaked < 10_000_004 + 4096, leaked


@pytest.mark.parametrize("method", ["fork", "forkserver"])
def test_forked_pool_workers_start_from_what_they_inherited(tmp_path, python, method):
    """multiprocessing's fork and forkserver methods: the workers are forks (of the program, or
    of the forkserver it spawned, which imported the program's module too), not new programs.
    Each worker's capture starts from what it inherited: the module's 5 MB bytearray, made
    before the pool, is in use in each worker at the line that made it; the four tasks'
    bytearrays add up, over the workers, to what the tasks asked for at theirs."""
    script, run = run_pool(tmp_path, python, method)
    rows = processes(run)["processes"]
    assert all("error" not in r for r in rows), [r for r in rows if "error" in r]
    program = rows[0]
    assert program["argv"][-1] == str(script) and not program["forked"]
    if method == "fork":
        forker = program
    else:  # the forkserver: an interpreter the program spawned
        forker = next(r for r in rows if any("multiprocessing.forkserver" in a for a in r["argv"])
                      and not r["forked"])
        assert forker["parent_capture"] == program["capture"]
    # (A pyenv shim before the program forks subshells of its own: recorded too.)
    workers = [r for r in rows if r["forked"] and r["parent_capture"] == forker["capture"]
               and r["argv"] == forker["argv"]]
    assert len(workers) == 2, [(r["argv"], r["forked"]) for r in rows]

    def at_line(capture, line):
        return leaked_at(capture, script, line)

    assert 5_000_001 <= at_line(program["capture"], 2) < 5_000_001 + 1024
    leaked = 0
    for worker in workers:
        assert worker["complete"], worker
        assert 5_000_001 <= at_line(worker["capture"], 2) < 5_000_001 + 1024  # inherited
        leaked += at_line(worker["capture"], 5)
        assert worker["totals"]["in_use_at_exit_bytes"] > 5_000_000
    assert 10_000_004 < leaked < 10_000_004 + 4096, leaked
    assert at_line(run, 5) == leaked  # the run as one: its processes merged by line


def test_forks_while_other_threads_allocate_never_hang_a_child(tmp_path):
    """A followed descendant (its writer inside it) forks 200 times while another of its threads
    allocates without pause: every fork lands somewhere in that thread's and the writer's work,
    and no child hangs on a lock they held; each child's capture has its 500 bytes."""
    storm = PROGRAMS / "fork_storm"
    proc, run = run_following(tmp_path, "sh", "-c", f"'{storm}' 200; true")
    assert (proc.returncode, proc.stdout) == (0, "forked 200\n"), proc.stderr
    # Each forked child's figures start from its parent's heap at the fork, replayed from the
    # parent's capture up to it: 200 such replays of a parent that allocates without pause take
    # 15-17 s here, and 2 minutes under ASan (tools/sanitize), where 120 s was once the bound.
    rows = processes(run, timeout=600)["processes"]
    children = [r for r in rows if r["forked"] and r["argv"][1:] == ["200"]]
    assert len(children) == 200, len(children)
    for child in children[:5]:
        assert Recorded(None, child["capture"]).row_at("fork_storm.c", "storm_child")["leaked_bytes"] == 500
