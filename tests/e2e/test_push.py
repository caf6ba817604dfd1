"""Pushing profiles to Pyroscope (docs/push.md): `memlens push URL CAPTURE` and
`memlens run --push URL`. No Pyroscope server can run here: a receiver on 127.0.0.1 checks each
request against Pyroscope's documented ingest API (POST /ingest, name/from/until/format/spyName,
multipart/form-data with a "profile" part), and `go tool pprof -raw` reads each pprof back, so
that the known bytes of tests/programs/push_known.c are asserted at its functions."""
import base64
import email.parser
import email.policy
import http.server
import os
import pathlib
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import MEMLENS, PROGRAMS, memlens

GO = next((g for g in ("/usr/lib/go/bin/go", "/usr/local/go/bin/go", shutil.which("go"))
           if g and os.access(g, os.X_OK)), None)
pytestmark = pytest.mark.skipif(GO is None, reason="go tool pprof reads the pushed profiles back: "
                                "install Debian's golang-go (.ci/run does)")

KEEP, CHURN, STARTUP = 1000, 4096, 65536  # push_known.c's block sizes
FUNCTIONS = ("keep_block", "churn_block", "startup_block")


class Receiver:
    """A Pyroscope stand-in: every request is checked against the ingest API, its pprof saved."""

    def __init__(self, folder):
        self.folder = pathlib.Path(folder)
        self.requests = []  # dicts: query, headers, pprof (path)
        self.problems = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    receiver.check(self, body)
                    self.send_response(200)
                except AssertionError as e:
                    receiver.problems.append(str(e))
                    self.send_response(400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                receiver.problems.append(f"GET {self.path}")
                self.send_response(405)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def check(self, handler, body):
        url = urllib.parse.urlsplit(handler.path)
        assert url.path == "/ingest", f"path {url.path}"
        query = urllib.parse.parse_qs(url.query, strict_parsing=True)
        assert all(len(v) == 1 for v in query.values()), query
        query = {k: v[0] for k, v in query.items()}
        assert set(query) == {"name", "from", "until", "format", "spyName"}, query
        assert query["format"] == "pprof" and query["spyName"] == "memlens", query
        assert re.fullmatch(r"[^{}]+\{([a-z_]+=[^,{}=]+)(,[a-z_]+=[^,{}=]+)*\}", query["name"])
        assert int(query["from"]) <= int(query["until"]), query
        content_type = handler.headers["Content-Type"]
        assert content_type.startswith("multipart/form-data; boundary="), content_type
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        parts = {p.get_param("name", header="content-disposition"): p for p in message.iter_parts()}
        assert list(parts) == ["profile"], list(parts)
        pprof = parts["profile"].get_payload(decode=True)
        assert pprof[:2] == b"\x1f\x8b", "the profile part is not gzipped"
        path = self.folder / f"push-{len(self.requests)}.pb.gz"
        path.write_bytes(pprof)
        self.requests.append({"query": query, "headers": dict(handler.headers), "pprof": path})

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        assert not self.problems, self.problems


@pytest.fixture
def receiver(tmp_path):
    r = Receiver(tmp_path)
    yield r
    r.close()


def figures(pprof):
    """{function: [alloc_objects, alloc_space, inuse_objects, inuse_space]} summed over the
    samples whose stack holds the function, as `go tool pprof -raw` reads the file."""
    out = subprocess.run([GO, "tool", "pprof", "-raw", "-symbolize=none", str(pprof)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HOME": str(pprof.parent), "PPROF_TMPDIR": str(pprof.parent)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = lines.index("Samples:") + 1
    assert lines[header].replace("[dflt]", "").split() == ["alloc_objects/count", "alloc_space/bytes",
                                     "inuse_objects/count", "inuse_space/bytes"], lines[header]
    samples, locations, current = [], {}, None
    section = "samples"
    for line in lines[header + 1:]:
        if line.startswith("Locations"):
            section = "locations"
        elif line.startswith("Mappings"):
            section = "mappings"
        elif section == "samples" and ":" in line:
            values, ids = line.split(":", 1)
            samples.append(([int(v) for v in values.split()], ids.split()))
        elif section == "locations" and line.strip():
            m = re.match(r"\s*(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", line)
            if m:
                current = m.group(1)
                locations[current] = {m.group(2)}
            elif current:  # an inlined frame's line under its location
                locations[current].add(line.split()[0])
    result = {f: [0, 0, 0, 0] for f in FUNCTIONS}
    for values, ids in samples:
        names = set().union(*(locations.get(i, set()) for i in ids))
        for f in FUNCTIONS:
            if f in names:
                result[f] = [a + b for a, b in zip(result[f], values)]
    return result


def run_pushing(url, *options, ticks, tick_ms, timeout=120, env=None, tmp_path=None):
    capture = tmp_path / "push_known.mlens"
    start = time.monotonic()
    proc = subprocess.run([str(MEMLENS), "run", "-o", str(capture), "--push", url, *options, "--",
                           str(PROGRAMS / "push_known"), str(ticks), str(tick_ms)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    wall = time.monotonic() - start
    elapsed = int(re.search(r"elapsed_ms (\d+)", proc.stderr).group(1)) / 1000
    push_lines = [l for l in proc.stderr.splitlines() if l.startswith("memlens: push to ")]
    assert len(push_lines) == 1, proc.stderr
    return proc, wall, elapsed, push_lines[0]


def test_push_sends_a_finished_capture(tmp_path, receiver, record):
    recorded = record("push_known", "3", "10")
    assert recorded.proc.returncode == 3, recorded.proc.stderr
    pid = recorded.analyze("summary")["process"]["pid"]
    userinfo = receiver.url.replace("http://", "http://who:secret@")
    out = memlens("push", userinfo, recorded.capture, "--label", "env=test", "--label",
                  "region=eu-1", "--service", "shop.api", env={**os.environ, "MEMLENS_PUSH_TENANT": "team-a"})
    assert out.returncode == 0, out.stderr
    assert "secret" not in out.stderr
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert request["query"]["name"] == (
        f"shop.api{{host={socket.gethostname()},pid={pid},env=test,region=eu-1}}")
    assert request["headers"]["Authorization"] == "Basic " + base64.b64encode(b"who:secret").decode()
    assert request["headers"]["X-Scope-OrgID"] == "team-a"
    assert abs(int(request["query"]["from"]) - time.time()) < 300
    assert figures(request["pprof"]) == {
        "keep_block": [3, 3 * KEEP, 3, 3 * KEEP],
        "churn_block": [3, 3 * CHURN, 0, 0],
        "startup_block": [1, STARTUP, 1, STARTUP],
    }


def test_push_at_a_moment_is_dated_as_the_export_of_that_moment(tmp_path, receiver, record):
    """CAPTURE@moment: the figures describe the start of recording up to the moment, and so do
    the pprof's time and duration (one function dates both commands' profiles)."""
    recorded = record("push_known", "4", "300")
    assert recorded.proc.returncode == 3, recorded.proc.stderr
    moment = f"{recorded.capture}@t=0.5s"
    out = memlens("push", receiver.url, moment)
    assert out.returncode == 0, out.stderr
    pushed = receiver.requests[0]["pprof"]
    exported = tmp_path / "exported.pb.gz"
    out = memlens("export", "pprof", moment, "-o", exported)
    assert out.returncode == 0, out.stderr

    def dates(pprof):
        raw = subprocess.run([GO, "tool", "pprof", "-raw", "-symbolize=none", str(pprof)],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "HOME": str(tmp_path), "PPROF_TMPDIR": str(tmp_path)})
        assert raw.returncode == 0, raw.stderr
        return [l for l in raw.stdout.splitlines() if l.startswith(("Time:", "Duration:"))]
    assert len(dates(exported)) == 2
    assert dates(pushed) == dates(exported)
    assert figures(pushed) == figures(exported)
    query = receiver.requests[0]["query"]
    assert int(query["until"]) - int(query["from"]) <= 1  # half a second, not the 1.2 s run


# Full tracing, and sampling at one byte in one: every block sampled, its weight exactly 1.
@pytest.mark.parametrize("sampling", [[], ["--sample-rate", "1"]], ids=["full", "sampled"])
def test_run_pushes_every_period(tmp_path, receiver, sampling):
    ticks = 25
    proc, wall, elapsed, line = run_pushing(receiver.url, "--push-every", "500ms", "--label",
                                            "env=ci", *sampling, ticks=ticks, tick_ms=100,
                                            tmp_path=tmp_path)
    assert proc.returncode == 3 and proc.stdout == "done\n", proc.stderr
    sent = len(receiver.requests)
    assert line == f"memlens: push to {receiver.url}: {sent} profiles sent"
    # A 2.5 s run pushed every 0.5 s, and once more at the end: five, fewer on a machine so busy
    # that the loading thread (SCHED_IDLE) misses periods.
    assert sent >= 3, sent
    names = {r["query"]["name"] for r in receiver.requests}
    assert len(names) == 1 and re.fullmatch(
        rf"push_known\{{host={re.escape(socket.gethostname())},pid=\d+,env=ci\}}", names.pop())
    # Periods follow each other: each from is the last until.
    for before, after in zip(receiver.requests, receiver.requests[1:]):
        assert after["query"]["from"] == before["query"]["until"]
    periods = [figures(r["pprof"]) for r in receiver.requests]
    # Each period's allocations add up to the run's; in use is what is live at each push.
    totals = {f: sum(p[f][0] for p in periods) for f in FUNCTIONS}
    assert totals == {"keep_block": ticks, "churn_block": ticks, "startup_block": 1}
    assert sum(p["keep_block"][1] for p in periods) == ticks * KEEP
    assert sum(p["churn_block"][1] for p in periods) == ticks * CHURN
    assert sum(1 for p in periods if p["keep_block"][0] > 0) >= 2, "allocations spread over periods"
    in_use = [p["keep_block"][3] for p in periods]
    assert in_use == sorted(in_use) and in_use[-1] == ticks * KEEP
    assert all(p["keep_block"][2] * KEEP == p["keep_block"][3] for p in periods)
    assert periods[-1]["startup_block"][2:] == [1, STARTUP]
    assert all(p["churn_block"][2:] == [0, 0] for p in periods)


def baseline_elapsed(tmp_path, ticks, tick_ms):
    out = subprocess.run([str(MEMLENS), "run", "-o", str(tmp_path / "baseline.mlens"), "--",
                          str(PROGRAMS / "push_known"), str(ticks), str(tick_ms)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3
    return int(re.search(r"elapsed_ms (\d+)", out.stderr).group(1)) / 1000


def test_absent_server_changes_nothing(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    baseline = baseline_elapsed(tmp_path, 10, 100)
    proc, wall, elapsed, line = run_pushing(url, "--push-every", "200ms", ticks=10, tick_ms=100,
                                            tmp_path=tmp_path)
    assert proc.returncode == 3 and proc.stdout == "done\n"
    assert elapsed < baseline * 1.5 + 0.3, (elapsed, baseline)
    m = re.fullmatch(rf"memlens: push to {url}: 0 profiles sent, (\d+) not \((\d+) dropped while "
                     r"the server was slow or away, (\d+) failed, first: (.*)\)", line)
    assert m, line
    # At least one period and the last push (the loading thread runs at SCHED_IDLE: on a busy
    # machine it makes fewer than the period allows).
    assert int(m.group(1)) >= 2 and int(m.group(1)) == int(m.group(2)) + int(m.group(3))
    assert "refused" in m.group(4).lower() or "connect" in m.group(4).lower(), line
    assert wall < elapsed + 8, "memlens waits at most 5 s for the last pushes"


def test_server_that_never_answers_changes_nothing(tmp_path):
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        baseline = baseline_elapsed(tmp_path, 20, 100)
        proc, wall, elapsed, line = run_pushing(url, "--push-every", "200ms", ticks=20,
                                                tick_ms=100, tmp_path=tmp_path)
    assert proc.returncode == 3 and proc.stdout == "done\n"
    assert elapsed < baseline * 1.5 + 0.3, (elapsed, baseline)
    m = re.fullmatch(rf"memlens: push to {url}: 0 profiles sent, (\d+) not \((\d+) dropped while "
                     r"the server was slow or away, (\d+) failed, first: (.*)\)", line)
    assert m, line
    # Ten periods or more, and one in flight at a time: the queue of four overflowed.
    assert int(m.group(2)) >= 4 and int(m.group(3)) >= 1, line
    assert wall < elapsed + 9, "a send gives up at exit: 5 s of waiting, 1 s to notice"


@pytest.mark.parametrize("args, message", [
    (["--push", "ftp://u:secret@host"], "is not a Pyroscope server's URL"),
    (["--push", "localhost:4040"], "is not a Pyroscope server's URL"),
    (["--push", "http://h/?x=1"], "is not a Pyroscope server's URL"),
    (["--push", "http://h", "--label", "env"], "--label 'env': give NAME=VALUE"),
    (["--push", "http://h", "--label", "e-v=1"], "--label 'e-v=1': give NAME=VALUE"),
    (["--push", "http://h", "--label", "env=a,b"], "--label 'env=a,b': give NAME=VALUE"),
    (["--push", "http://h", "--label", "__name__=x"], "is Pyroscope's own"),
    (["--push", "http://h", "--service", "a b"], "--service 'a b'"),
    (["--push", "http://h", "--push-every", "10ms"], "--push-every '10ms'"),
    (["--push", "http://h", "--push-every", "soon"], "--push-every 'soon'"),
])
def test_bad_push_options_say_so(tmp_path, args, message):
    out = memlens("run", "-o", tmp_path / "x.mlens", *args, "--", PROGRAMS / "push_known", "1", "1")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("memlens: "), out.stderr
    assert message in out.stderr and "secret" not in out.stderr, out.stderr
    pushed = memlens("push", *args[1:2], tmp_path / "x.mlens", *args[2:])
    if args[2:3] != ["--push-every"]:  # a run option only
        assert pushed.returncode == 2 and message in pushed.stderr, pushed.stderr
        assert pushed.stderr.count("\n") == 1


def test_push_to_an_absent_server_fails_in_one_line(tmp_path, record):
    recorded = record("push_known", "1", "1")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://u:secret@127.0.0.1:{s.getsockname()[1]}"
    out = memlens("push", url, recorded.capture)
    assert out.returncode == 1 and out.stdout == ""
    shown = url.replace("secret", "***")
    assert re.fullmatch(rf"memlens: push to {re.escape(shown)} failed: .*(refused|connect).*\n",
                        out.stderr, re.I), out.stderr
