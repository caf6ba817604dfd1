"""Capture size on allocation churn (issue 32's bar: at most 4 bytes per allocation, its free
included), for the benchmark's churn workload (bench/workloads/churn.cc: a window of 4,096 live
blocks per thread, random sizes 16..4096 from four call sites). Format 8.1 took about 4.9 on one
thread and 5.1 on four. Format 9.0 with the writer's 65,536-event chunks takes 3.90 on one
thread (moving by about 0.05 between runs: the chunks the writer closes by time) and 4.2-4.3 on
four, where the bar is not met yet: four threads' batches interleave in each chunk, so a chunk
holds a quarter of each thread's reach, and on a loaded machine the writer drains smaller
batches. The four-thread case guards the gain (at most 4.5) until the encoder gets there."""
import re
import subprocess

import pytest

from conftest import MEMLENS, REPO, memlens


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    exe = tmp_path_factory.mktemp("churn") / "churn"
    subprocess.run(["g++", "-O2", "-g", "-std=c++17", "-pthread", "-o", str(exe),
                    str(REPO / "bench" / "workloads" / "churn.cc")], check=True)
    return exe


@pytest.mark.parametrize("threads, most", [(1, 4.0), (4, 4.5)])
def test_churn_bytes_per_allocation(churn, tmp_path, threads, most):
    capture = tmp_path / "churn.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "--no-index", "-o", str(capture), "--",
                           str(churn), str(threads), "1000000"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    counts = dict(re.findall(r"(\w+)=(\d+)", proc.stderr))
    allocs, frees = int(counts["allocs"]), int(counts["frees"])
    assert allocs == frees == 1_000_000
    summary = memlens("summary", "--json", capture)
    assert summary.returncode == 0, summary.stderr
    bytes_per_allocation = capture.stat().st_size / allocs
    assert bytes_per_allocation <= most, f"{bytes_per_allocation:.3f} bytes per allocation"


def test_format_8_captures_are_still_read():
    # A seed of the fuzz corpus that format 8.0 wrote (make_corpus.sh keeps it: not a seed-*).
    old = REPO / "tests" / "fuzz" / "corpus" / "capture" / "format-8.0-native"
    summary = memlens("summary", "--json", old, env={"MEMLENS_INDEX": "0", "PATH": ""})
    assert summary.returncode == 0, summary.stderr
    assert '"format_version": "8.0"' in summary.stdout and '"complete": true' in summary.stdout
