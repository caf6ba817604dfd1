"""What `memlens run` loads before the program starts: libcurl and the ~30 libraries behind it
(TLS, Kerberos, LDAP) cost every start 3.5 ms of CPU, so they are loaded only when a profile is
pushed (src/analyzer/export/libcurl.h). The program reads its parent's (memlens run's) mappings."""
import os
import shutil
import socket
import subprocess

import pytest

from conftest import MEMLENS, memlens

READ_PARENTS_MAPS = ["/bin/sh", "-c", "cat /proc/$PPID/maps"]


def libraries_mapped(maps):
    return {line.split("/")[-1] for line in maps.splitlines() if ".so" in line}


def test_run_without_push_loads_no_http_library(tmp_path):
    out = memlens("run", "-o", tmp_path / "x.mlens", "--", *READ_PARENTS_MAPS)
    assert out.returncode == 0, out.stderr
    mapped = libraries_mapped(out.stdout)
    assert any(name.startswith("libzstd") for name in mapped), mapped  # the maps were read
    assert not any(name.startswith(("libcurl", "libssl", "libgnutls", "libkrb5")) for name in
                   mapped), sorted(mapped)


def test_run_with_push_loads_libcurl(tmp_path):
    with socket.socket() as s:  # a port nobody listens on: the pushes fail, the run goes on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = memlens("run", "-o", tmp_path / "x.mlens", "--push", url, "--", *READ_PARENTS_MAPS)
    assert out.returncode == 0, out.stderr
    assert any(name.startswith("libcurl") for name in libraries_mapped(out.stdout))


def test_without_libcurl_push_says_so_and_the_rest_works(tmp_path):
    """libcurl hidden behind an empty file in a mount namespace of our own (needs root)."""
    library = next((os.path.realpath(p) for p in ("/lib/x86_64-linux-gnu/libcurl.so.4",
                                                  "/usr/lib/x86_64-linux-gnu/libcurl.so.4")
                    if os.path.exists(p)), None)
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if library is None or shutil.which("unshare") is None or probe.returncode != 0:
        pytest.skip("hiding libcurl needs unshare -m (root) and libcurl.so.4 where Debian puts it")
    script = (f'mount --bind /dev/null {library} || exit 99; '
              f'"$0" run --push http://127.0.0.1:9 -o {tmp_path}/a.mlens -- /bin/true; echo rc=$?; '
              f'"$0" run -o {tmp_path}/b.mlens -- /bin/echo recorded; echo rc=$?')
    out = subprocess.run(["unshare", "-m", "sh", "-c", script, str(MEMLENS)], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout == "rc=2\nrecorded\nrc=0\n", (out.stdout, out.stderr)
    assert out.stderr.startswith("memlens: cannot load libcurl (libcurl.so.4), which pushing needs")
    assert out.stderr.count("\n") == 2  # that line, and the second run's "capture written"


def test_the_commands_exceptions_unwind_with_the_c_librarys_unwinder():
    """libunwind, which the writer's core links, exports _Unwind_* twins of libgcc_s's: C++
    exceptions (every bad option, a writer out of memory) must bind to libgcc_s's. Without
    libcurl, which used to bring libgcc_s in first, libstdc++ bound to libunwind's."""
    out = subprocess.run([str(MEMLENS), "--no-such-option"], capture_output=True, text=True,
                         env={**os.environ, "LD_DEBUG": "bindings"}, timeout=60)
    assert out.returncode == 2
    bindings = [line for line in out.stderr.splitlines() if "`_Unwind_RaiseException'" in line]
    # (A sanitized build's libasan stands in front of libgcc_s's.)
    assert bindings and not any("libunwind" in line for line in bindings), bindings
