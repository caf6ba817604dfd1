"""Sites of installed applications (docs/python.md): the package a console-script launcher or
`python -m` runs is the program's own code, so its lines are the sites, not the launcher's
`sys.exit(main())`; the same package called from a user's script stays a library. The
application (tests/python/installed_app) is installed by pip from a wheel this test writes,
without network, so the launcher is pip's own."""
import os
import pathlib
import subprocess
import zipfile

import pytest

from conftest import MEMLENS, REPO, Recorded
from test_python import HOOKS, SCRIPTS

APP = REPO / "tests" / "python" / "installed_app"
pytestmark = pytest.mark.skipif(not HOOKS, reason="memlens was built without Python headers, "
                                "so there are no Python hooks to test")


def marker_line(path, marker):
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if f"# @{marker}" in text)


@pytest.fixture(scope="module")
def installed(tmp_path_factory, python):
    """(prefix, site-packages) of lensapp installed by pip from a wheel made here."""
    tmp = tmp_path_factory.mktemp("app")
    wheel = tmp / "lensapp-1.0-py3-none-any.whl"
    info = "lensapp-1.0.dist-info/"
    with zipfile.ZipFile(wheel, "w") as z:
        names = []
        for source in sorted((APP / "lensapp").glob("*.py")):
            names.append(f"lensapp/{source.name}")
            z.writestr(names[-1], source.read_text())
        for name, text in [("METADATA", "Metadata-Version: 2.1\nName: lensapp\nVersion: 1.0\n"),
                           ("WHEEL", "Wheel-Version: 1.0\nGenerator: memlens-tests\n"
                                     "Root-Is-Purelib: true\nTag: py3-none-any\n"),
                           ("entry_points.txt", "[console_scripts]\nlensapp = lensapp.cli:main\n")]:
            names.append(info + name)
            z.writestr(names[-1], text)
        z.writestr(info + "RECORD", "".join(f"{n},,\n" for n in names + [info + "RECORD"]))
    prefix = tmp / "prefix"
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                           "--disable-pip-version-check", "--prefix", str(prefix), str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Where pip's --prefix puts it (a free-threaded build's folder is python3.13t): asked of the
    # interpreter.
    site = pathlib.Path(python.output(
        "import sysconfig; print(sysconfig.get_path('purelib', 'posix_prefix', "
        f"vars={{'base': {str(prefix)!r}}}))").strip())
    assert (prefix / "bin" / "lensapp").read_text().splitlines()[-1].strip() == "sys.exit(main())"
    return prefix, site


def top_site_by_peak(tmp_path, site_packages, *command):
    capture = tmp_path / "app.mlens"
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--", *command],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(site_packages)))
    assert proc.returncode == 0 and proc.stdout == "6000000\n", proc.stderr
    rows = Recorded(proc, capture).analyze("top", "--by", "line", "--sort", "peak")["rows"]
    return rows[0]


def test_console_script_sites_are_its_package_lines(installed, tmp_path, python):
    prefix, site = installed
    row = top_site_by_peak(tmp_path, site, str(prefix / "bin" / "lensapp"))
    assert row["site"]["file"] == str(site / "lensapp" / "work.py")
    assert row["site"]["line"] == marker_line(APP / "lensapp" / "work.py", "app_block")
    assert row["site"]["function"] == "build"
    assert row["peak_bytes"] == python.size_of("bytearray(6_000_000)")


def test_python_dash_m_sites_are_its_package_lines(installed, tmp_path, python):
    prefix, site = installed
    row = top_site_by_peak(tmp_path, site, python, "-m", "lensapp")
    assert row["site"]["file"] == str(site / "lensapp" / "work.py")
    assert row["site"]["line"] == marker_line(APP / "lensapp" / "work.py", "app_block")
    assert row["peak_bytes"] == python.size_of("bytearray(6_000_000)")


def test_installed_package_called_from_a_script_stays_a_library(installed, tmp_path, python):
    prefix, site = installed
    script = SCRIPTS / "uses_lensapp.py"
    row = top_site_by_peak(tmp_path, site, python, str(script))
    assert row["site"]["file"] == str(script)
    assert row["site"]["line"] == marker_line(script, "calls_lensapp")
    assert row["peak_bytes"] == python.size_of("bytearray(6_000_000)")
