import ast
import logging
import math
import os
import socket
import time
import unittest

from lavender import _sender, _wire
from lavender._phase import Phase

from .servers import Recorder, Silent

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lavender")


class URLTest(unittest.TestCase):
    def test_forms(self):
        for raw, want in [
            (None, "http://127.0.0.1:9877"),
            ("", "http://127.0.0.1:9877"),
            ("http://127.0.0.1:9877/", "http://127.0.0.1:9877"),
            ("http://127.0.0.1:9877//", "http://127.0.0.1:9877"),
            ("127.0.0.1:9877", "http://127.0.0.1:9877"),
            ("  gpu-box:9877 ", "http://gpu-box:9877"),
            ("HTTPS://lavender.example/proxy/", "https://lavender.example/proxy"),
            ("http://127.0.0.1:9877/api/v1/heartbeat", "http://127.0.0.1:9877"),
            ("http://[::1]:9877/", "http://[::1]:9877"),
        ]:
            self.assertEqual(_wire.normalize_url(raw), want, raw)

    def test_refused(self):
        for raw, why in [
            ("ftp://host", "scheme"),
            ("http://user:pw@host", "LAVENDER_USERNAME"),
            ("http://host:port", "bad port"),
            ("http://", "no host"),
            ("http://host/?x=1", "query"),
        ]:
            with self.assertRaises(ValueError) as cm:
                _wire.normalize_url(raw)
            self.assertIn(why, str(cm.exception))


class RankTest(unittest.TestCase):
    def test_launchers(self):
        for env, want in [
            ({}, 0),
            ({"RANK": "3", "LOCAL_RANK": "1"}, 3),  # torchrun, accelerate, DeepSpeed
            ({"LOCAL_RANK": "2"}, 2),
            ({"SLURM_PROCID": "5"}, 5),
            ({"SLURM_PROCID": "1", "RANK": "0"}, 0),  # srun starting torchrun: RANK wins
            ({"OMPI_COMM_WORLD_RANK": "4"}, 4),
            ({"RANK": "x", "SLURM_PROCID": "1"}, 1),
        ]:
            self.assertEqual(_wire.rank_from_env(env), want, env)


class ValueTest(unittest.TestCase):
    def test_loss(self):
        self.assertEqual(_wire.loss_value(0.5), 0.5)
        self.assertEqual(_wire.loss_value(2), 2.0)
        self.assertEqual(_wire.loss_value(math.nan), "NaN")
        self.assertEqual(_wire.loss_value(float("-inf")), "-Infinity")
        self.assertIsNone(_wire.loss_value("0.5x"))
        self.assertIsNone(_wire.loss_value(True))

    def test_count(self):
        self.assertEqual(_wire.count(12), 12)
        self.assertEqual(_wire.count(12.0), 12)
        self.assertIsNone(_wire.count(12.5))
        self.assertIsNone(_wire.count(-1))
        self.assertIsNone(_wire.count(0, least=1))
        self.assertIsNone(_wire.count(float("inf")))
        self.assertIsNone(_wire.count(None))
        self.assertIsNone(_wire.count("7"))

    def test_reason(self):
        self.assertEqual(_wire.reason_of(ValueError("shape mismatch")), "ValueError: shape mismatch")
        self.assertEqual(_wire.reason_of(KeyboardInterrupt()), "KeyboardInterrupt")

        class Broken(Exception):
            def __str__(self):
                raise RuntimeError

        self.assertIn("Broken", _wire.reason_of(Broken()))

    def test_reason_of_a_worker_reraise(self):
        # What torch's DataLoader raises in the main process for an
        # exception in a worker: the worker's traceback is the message.
        worker = ("Caught ValueError in DataLoader worker process 0.\n"
                  "Original Traceback (most recent call last):\n"
                  '  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop\n'
                  "    data = fetcher.fetch(index)\n"
                  '  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/fetch.py", line 51, in fetch\n'
                  "    data = [self.dataset[idx] for idx in possibly_batched_index]\n"
                  '  File "train.py", line 12, in __getitem__\n'
                  '    raise ValueError("bad sample %d" % i)\n'
                  "ValueError: bad sample 9\n")
        self.assertEqual(_wire.reason_of(ValueError(worker)), "ValueError: bad sample 9")
        self.assertEqual(_wire.reason_of(RuntimeError(worker.replace("ValueError: bad", "my.DataError: bad"))),
                         "my.DataError: bad sample 9")
        # A message whose last line names no exception reads as before.
        self.assertEqual(_wire.reason_of(ValueError("shape mismatch\n  more text")),
                         "ValueError: shape mismatch more text")
        self.assertEqual(_wire.reason_of(RuntimeError("CUDA error\nHint: pass CUDA_LAUNCH_BLOCKING=1")),
                         "RuntimeError: CUDA error Hint: pass CUDA_LAUNCH_BLOCKING=1")


class SyntaxTest(unittest.TestCase):
    def test_python_3_8(self):
        """The package parses as Python 3.8: no 3.9+ syntax slipped in."""
        for name in sorted(os.listdir(PACKAGE)):
            if name.endswith(".py"):
                with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
                    ast.parse(f.read(), name, feature_version=(3, 8))

    def test_imports_only_the_standard_library(self):
        import sys
        std = set(getattr(sys, "stdlib_module_names", ())) or None
        for name in sorted(os.listdir(PACKAGE)):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(PACKAGE, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                mods = []
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    mods = [node.module]
                for m in mods:
                    top = m.split(".")[0]
                    if top in ("transformers", "lightning", "pytorch_lightning"):
                        continue  # the callbacks' frameworks, imported when used
                    if std is not None:
                        self.assertIn(top, std, "%s imports %s" % (name, m))


if __name__ == "__main__":
    unittest.main()


class RedactTest(unittest.TestCase):
    """No message of the client quotes a URL's password or a query's token:
    training logs are shipped to W&B, Slurm and CI."""

    SECRETS = ("S3cret", "tok3n")

    def test_redact(self):
        for text, want in [
            ("http://alice:S3cret@host:9877", "http://***@host:9877"),
            ("alice:S3cret@host:9877", "***@host:9877"),
            ("'https://a:p@ss@h/x?token=abc&y=2#f'", "'https://***@h/x?token=***&y=***#f'"),
            ("http://host/?S3cret", "http://host/?***"),
            ("is LAVENDER_URL the exporter's address?", "is LAVENDER_URL the exporter's address?"),
            ("http://127.0.0.1:9877", "http://127.0.0.1:9877"),
        ]:
            self.assertEqual(_wire.redact(text), want, text)

    def assertHidden(self, lines):
        self.assertTrue(lines, "nothing was logged")
        for line in lines:
            for secret in self.SECRETS:
                self.assertNotIn(secret, line)

    def test_refused_urls(self):
        for raw in [
            "http://alice:S3cret@host:9877",
            "alice:S3cret@host:9877",
            "ftp://alice:S3cret@host",
            "http://alice:S3cret@host:port",
            "http://alice:S3cret@",
            "http://host:9877/?token=tok3n",
            "https://host:9877?tok3n",
        ]:
            with self.assertRaises(ValueError) as cm:
                _wire.normalize_url(raw)
            self.assertHidden([str(cm.exception)])
            with self.assertLogs("lavender", logging.DEBUG) as logs:
                Phase("P", every=1, env={"LAVENDER_URL": raw})
            self.assertHidden(logs.output)

    def test_every_sender_warning(self):
        # A base URL with secrets cannot pass normalize_url; the sender's
        # messages are redacted all the same, so none can leak one.
        def base(port, scheme="http"):
            return "%s://alice:S3cret@127.0.0.1:%d/p?token=tok3n" % (scheme, port)

        def sweep(url, env=None, bodies=1):
            s = _sender.Sender(url, env=env or {}, timeout=0.3)
            with self.assertLogs("lavender", logging.DEBUG) as logs:
                for _ in range(bodies):
                    s.post({"phase": "P", "event": "end", "status": "failed"}, wait=0 if bodies > 1 else 2)
                if bodies > 1:
                    time.sleep(0.5)
            self.assertHidden(logs.output)
            return logs.output

        for status in (500, 302, 409):
            rec = Recorder(status=status)
            self.addCleanup(rec.close)
            sweep(base(rec.server.server_address[1]))
        rec = Recorder()
        self.addCleanup(rec.close)
        port = rec.server.server_address[1]
        sweep(base(port), env={"LAVENDER_USERNAME": "alice", "LAVENDER_PASSWORD_FILE": "/nonexistent/password"})
        sweep(base(port, "https"), env={"LAVENDER_TLS_CA_FILE": "/nonexistent/ca.pem"})
        silent = Silent()
        self.addCleanup(silent.close)
        sweep(base(silent.sock.getsockname()[1]), bodies=_sender.MAX_OUTBOX + 2)
        garbage = Silent(garbage=True)
        self.addCleanup(garbage.close)
        sweep(base(garbage.sock.getsockname()[1]))
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))  # a port nobody listens on
        self.addCleanup(sock.close)
        sweep(base(sock.getsockname()[1]))


class VersionTest(unittest.TestCase):
    def test_a_checkout_reports_the_repository_version(self):
        # The one version of the repository, which the Go binary embeds too.
        import lavender
        path = os.path.join(os.path.dirname(lavender.__file__), os.pardir, os.pardir, "VERSION")
        with open(path, encoding="utf-8") as f:
            self.assertEqual(lavender.__version__, f.read().strip())
