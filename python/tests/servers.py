"""Exporters for the tests, on 127.0.0.1 ports from :0: one that records
every heartbeat and answers as told, one that accepts and never answers,
one that answers garbage."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# Prepended to every child's code: SIGINT raises KeyboardInterrupt, as in
# a program started from a terminal. A shell that starts the tests in the
# background (`go test ./... &`) leaves SIGINT ignored, every child would
# inherit that, and Python then installs no handler of its own.
AS_FROM_A_TERMINAL = "import signal as _s; _s.signal(_s.SIGINT, _s.default_int_handler)\n"

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
FRAMEWORKS = os.path.join(HERE, "frameworks")


class Recorder:
    """An exporter that records each heartbeat's path, headers and body."""

    def __init__(self, status=200):
        self.status = status  # or a callable body -> status, or (status, error)
        self.bodies, self.paths, self.headers = [], [], []
        self._cond = threading.Condition()
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                status = rec.status(body) if callable(rec.status) else rec.status
                error = "refused by the test"
                if isinstance(status, tuple):  # (status, the error the server words)
                    status, error = status
                with rec._cond:
                    rec.bodies.append(body)
                    rec.paths.append(self.path)
                    rec.headers.append(dict(self.headers))
                    rec._cond.notify_all()
                answer = json.dumps({"error": error}).encode() if status >= 400 else b"{}"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self):
        with self._cond:
            return [(b["event"], b.get("status")) for b in self.bodies]

    def wait_for(self, pred, timeout=10):
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(list(self.bodies)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Silent:
    """Accepts connections and never answers (a hung exporter); with
    garbage, answers every request with a line that is not HTTP."""

    def __init__(self, garbage=False):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.garbage, self.conns, self.accepted = garbage, [], 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(c)
            if self.garbage:
                try:
                    c.recv(65536)
                    c.sendall(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
                    c.close()
                except OSError:
                    pass

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            c.close()


def run_python(code, env=None, timeout=60):
    """Runs code in a fresh python3 with the package and the framework
    stand-ins on its path; returns the CompletedProcess."""
    return run_child(code, FRAMEWORKS, env, timeout)


def run_child(code, frameworks, env=None, timeout=60, cwd=None):
    """Runs code in a fresh interpreter with the package and the
    frameworks directory given on its path, none of the test run's own
    rank or phase variables, and SIGINT as from a terminal; returns the
    CompletedProcess."""
    full = dict(os.environ)
    for k in ("LAVENDER_PHASE", "RANK", "LOCAL_RANK", "SLURM_PROCID", "LAVENDER_URL", "WORLD_SIZE"):
        full.pop(k, None)
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join([PACKAGE_ROOT, frameworks])
    full["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run([sys.executable, "-c", AS_FROM_A_TERMINAL + code], env=full, capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
