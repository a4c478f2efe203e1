import ast
import math
import os
import unittest

from lavender import _wire

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
