"""A server that runs each request on a thread of its own (the standard library's
ThreadingHTTPServer, as `python -m http.server` does), on 127.0.0.1 and a free port it writes
to PORT_FILE. On SIGTERM it writes its own peak RSS (VmHWM, KiB) to PEAK_FILE and exits 0.

    python3 thread_per_request.py PORT_FILE PEAK_FILE
"""
import http.server
import os
import signal
import sys


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello\n" * 100
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def stop(*_):
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(sys.argv[2] + ".tmp", "w") as out:
        out.write(peak + "\n")
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])  # whole when the bench sees it
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
with open(sys.argv[1] + ".tmp", "w") as out:
    out.write(str(server.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])  # the bench waits for the whole file
server.serve_forever()
