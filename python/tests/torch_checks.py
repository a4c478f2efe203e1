"""lavender with real PyTorch: a plain training loop, and two ranks over
gloo started the way torchrun starts them (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE, LOCAL_RANK; env:// rendezvous). Not found by unittest's
default pattern: python/torch_test.go runs it with the Python that has
Debian's python3-torch (/usr/bin/python3), which need not be python3 on
PATH.

    /usr/bin/python3 -m unittest tests.torch_checks     (in python/)
"""

import os
import socket
import subprocess
import sys
import time
import unittest

import torch

from lavender._phase import Phase

from .servers import PACKAGE_ROOT, Recorder

RANK_SCRIPT = r"""
import os, sys, time
import torch, torch.distributed as dist
import lavender

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
fail_at = int(os.environ.get("FAIL_AT", "-1"))
with lavender.phase("DDP", every=0.05, total=20) as p:
    for step in range(20):
        if rank == 1 and step == fail_at:
            if os.environ.get("FAIL_HOW") == "SIGKILL":  # the OOM killer
                os.kill(os.getpid(), 9)
            raise RuntimeError("NCCL error: unhandled system error (rank 1 stand-in)")
        x, y = torch.randn(16, 8), torch.randn(16, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        p.progress(step + 1, 20, loss=loss)
        time.sleep(0.01)
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TorchLoopTest(unittest.TestCase):
    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)

    def test_plain_loop_with_tensor_loss(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        x, y = torch.randn(64, 4), torch.randn(64, 1)
        with Phase("Pretrain 1/3", every=0.02, total=50, url=self.exporter.url) as p:
            for step in range(50):
                loss = torch.nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                p.progress(step + 1, 50, loss=loss)
                self.assertIsNone(p._progress[2].grad_fn, "the stored loss keeps the graph alive")
                # Unslowed, 50 steps of this model end before the first ping
                # is due on a quiet machine; a real step takes longer.
                time.sleep(0.01)
        bodies = self.exporter.bodies
        self.assertEqual((bodies[0]["event"], bodies[0]["step"], bodies[0]["total"]), ("start", 0, 50))
        end = bodies[-1]
        self.assertEqual((end["status"], end["step"]), ("ok", 50))
        self.assertAlmostEqual(end["loss"], float(loss), places=5)
        self.assertTrue(any(isinstance(b.get("loss"), float) for b in bodies if b["event"] == "ping"))

    def test_nan_tensor_loss(self):
        with Phase("Pretrain 1/3", every=0.02, url=self.exporter.url) as p:
            p.progress(1, 10, loss=torch.tensor(float("nan"), requires_grad=True) * 2)
        self.assertEqual(self.exporter.bodies[-1]["loss"], "NaN")


class TwoRanksTest(unittest.TestCase):
    """Two ranks over gloo, started with torchrun's env:// variables."""

    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)

    def launch(self, extra=None):
        port = str(free_port())
        procs = []
        for rank in (0, 1):
            env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2",
                       LOCAL_RANK=str(rank), LAVENDER_URL=self.exporter.url, PYTHONPATH=PACKAGE_ROOT,
                       PYTHONDONTWRITEBYTECODE="1", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
            env.pop("LAVENDER_PHASE", None)
            env.update(extra or {})
            procs.append(subprocess.Popen([sys.executable, "-c", RANK_SCRIPT], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        out = []
        for p in procs:
            try:
                o, e = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                o, e = p.communicate()
            out.append((p.returncode, e))
        return out

    def test_both_ranks_succeed(self):
        (rc0, e0), (rc1, e1) = self.launch()
        self.assertEqual((rc0, rc1), (0, 0), e0 + e1)
        events = self.exporter.events()
        self.assertEqual(events.count(("start", None)), 1, "a start from rank 1 would be a spurious restart")
        self.assertEqual(events[-1], ("end", "ok"))
        self.assertEqual(events.count(("end", "ok")), 1)
        self.assertEqual({b["pid"] for b in self.exporter.bodies if "pid" in b}, {b["pid"] for b in self.exporter.bodies[:1]},
                         "only rank 0's process reports")

    def test_rank_one_fails(self):
        (rc0, e0), (rc1, e1) = self.launch({"FAIL_AT": "5"})
        self.assertNotEqual(rc1, 0, e1)
        ends = [b for b in self.exporter.bodies if b["event"] == "end"]
        self.assertNotIn("ok", [b["status"] for b in ends], "a failed run reported ok: %s" % ends)
        reasons = [b.get("reason", "") for b in ends]
        self.assertIn("rank 1: RuntimeError: NCCL error: unhandled system error (rank 1 stand-in)", reasons)
        if rc0 == 0:
            self.fail("rank 0 finished although rank 1 died mid-run: " + e0)

    def test_rank_one_killed(self):
        # Rank 1 dies of SIGKILL and says nothing; rank 0's collective
        # fails on the closed connection, and its client reports that. The
        # reason is one the exporter ranks below a rank's own crash (its
        # TestReasonStrength holds this gloo form), so the launcher's root
        # cause, told by `lavender phase run` a moment later, replaces it.
        (rc0, e0), (rc1, e1) = self.launch({"FAIL_AT": "5", "FAIL_HOW": "SIGKILL"})
        self.assertEqual(rc1, -9, e1)
        self.assertNotEqual(rc0, 0, "rank 0 finished although rank 1 died mid-run: " + e0)
        ends = [b for b in self.exporter.bodies if b["event"] == "end"]
        self.assertEqual([b["status"] for b in ends], ["failed"], ends)
        self.assertRegex(ends[0].get("reason", ""), r"(?i)connection (closed|reset) by peer|broken pipe", ends)


if __name__ == "__main__":
    unittest.main()
