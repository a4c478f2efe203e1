"""lavender.lightning.Callback under the real Lightning (2.1, on Debian's
torch): a fit's phase, validation and the sanity check, failures, SIGTERM
and Ctrl-C stopping the run exactly as Lightning alone does, and checkpoint
directories outside default_root_dir."""

import logging
import os
import signal
import tempfile
import time
import unittest
from unittest import mock

from . import realfw
from .servers import Recorder

realfw.frameworks()

import lavender  # noqa: E402
import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
logging.getLogger("lightning.fabric").setLevel(logging.ERROR)


def ends(bodies):
    return [b for b in bodies if b["event"] == "end"]


def pings(bodies):
    return [b for b in bodies if b["event"] == "ping"]


class Module(pl.LightningModule):
    def __init__(self, fail_at=None, error=RuntimeError("boom"), fail_in=None, val_sleep=0.0):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.fail_at, self.error, self.fail_in, self.val_sleep = fail_at, error, fail_in, val_sleep

    def configure_optimizers(self):
        if self.fail_in == "configure_optimizers":
            raise self.error
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def training_step(self, batch, batch_idx):
        if batch_idx == self.fail_at:
            raise self.error
        time.sleep(0.01)
        loss = self.layer(batch).pow(2).mean() * 0 + 1.0 / (batch_idx + 1)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        if self.fail_in == "sanity" and self.trainer.sanity_checking:
            raise self.error
        time.sleep(self.val_sleep)


def loader(n):
    return torch.utils.data.DataLoader(torch.randn(n, 2), batch_size=1)


QUIET = dict(accelerator="cpu", enable_progress_bar=False, enable_model_summary=False, logger=False)


class LightningTest(unittest.TestCase):
    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        patch = mock.patch.dict(os.environ, {"LAVENDER_URL": self.exporter.url})
        patch.start()
        self.addCleanup(patch.stop)
        for k in ("RANK", "LOCAL_RANK", "LAVENDER_PHASE", "SLURM_PROCID"):
            os.environ.pop(k, None)
        self.out = tempfile.mkdtemp()

    def fit(self, module, epochs=2, val=True, callbacks=(), **kw):
        trainer = pl.Trainer(max_epochs=epochs, default_root_dir=self.out,
                             callbacks=[lavender.lightning.Callback("Pretrain 1/3", every=0.02)] + list(callbacks),
                             **dict(QUIET, **kw))
        trainer.fit(module, train_dataloaders=loader(7), val_dataloaders=loader(3) if val else None)
        return trainer

    def test_fit(self):
        self.fit(Module())
        bodies = self.exporter.bodies
        # The default checkpoint dir, under default_root_dir, is watched too.
        self.assertEqual((bodies[0]["event"], bodies[0]["dirs"]),
                         ("start", [os.getcwd(), self.out, os.path.join(self.out, "checkpoints")]))
        end = bodies[-1]
        self.assertEqual((end["event"], end["status"], end["step"], end["total"]), ("end", "ok", 14, 14))
        self.assertAlmostEqual(end["loss"], 1.0 / 7, places=5)
        self.assertTrue(any(b.get("step") == 0 and b.get("total") == 14 for b in pings(bodies)), "no step 0 at train start")
        files = sorted(os.listdir(os.path.join(self.out, "checkpoints")))
        saves = [b["save_bytes"] for b in pings(bodies) if "save_bytes" in b]
        self.assertTrue(saves, "no checkpoint size reported")
        self.assertEqual(saves[-1], os.path.getsize(os.path.join(self.out, "checkpoints", files[-1])))

    def test_checkpoint_dir_elsewhere_is_watched_and_gets_the_save(self):
        # A checkpoint directory on another filesystem than default_root_dir:
        # the disk guard watches it, and books each save on the last of the
        # dirs a save ping carries.
        ckpt = tempfile.mkdtemp()
        self.fit(Module(), epochs=1, val=False,
                 callbacks=[pl.callbacks.ModelCheckpoint(dirpath=ckpt, filename="m-{step}")])
        bodies = self.exporter.bodies
        self.assertEqual(bodies[0]["dirs"], [os.getcwd(), self.out, os.path.realpath(ckpt)])
        saved = [b for b in pings(bodies) if "save_bytes" in b]
        self.assertTrue(saved, bodies)
        (name,) = os.listdir(ckpt)
        self.assertEqual(saved[-1]["save_bytes"], os.path.getsize(os.path.join(ckpt, name)))
        self.assertEqual(saved[-1]["dirs"][-1], os.path.realpath(ckpt), "the save is booked on another filesystem")

    def test_validation_and_sanity_check_progress(self):
        self.fit(Module(val_sleep=0.05), epochs=1)
        bodies = self.exporter.bodies
        evals = [(b["eval_step"], b.get("eval_total")) for b in pings(bodies) if "eval_step" in b]
        self.assertIn(3, [t for _, t in evals], "validation batches not reported")
        self.assertIn(2, [t for _, t in evals], "sanity check batches not reported")
        # The sanity check runs before the first training step: it is the
        # first step's wait, at step 0 from the start.
        self.assertEqual((bodies[0]["event"], bodies[0].get("step")), ("start", 0))
        sanity = [b for b in pings(bodies) if b.get("eval_total") == 2]
        self.assertTrue(sanity and all(b.get("step") == 0 for b in sanity), sanity)

    def test_resumed_fit_starts_at_its_own_step(self):
        # Not at step 0: from there the resumed step would look like a burst
        # of steps, and the rate would be nonsense.
        self.fit(Module(), epochs=1, val=False)
        (ckpt,) = os.listdir(os.path.join(self.out, "checkpoints"))
        self.exporter.bodies.clear()
        trainer = pl.Trainer(max_epochs=2, default_root_dir=self.out,
                             callbacks=[lavender.lightning.Callback("Pretrain 1/3", every=0.02)], **QUIET)
        trainer.fit(Module(), train_dataloaders=loader(7), ckpt_path=os.path.join(self.out, "checkpoints", ckpt))
        bodies = self.exporter.bodies
        self.assertEqual(bodies[0]["event"], "start")
        self.assertNotIn("step", bodies[0])
        self.assertEqual([b["step"] for b in bodies if "step" in b][0], 7)
        self.assertEqual((bodies[-1]["status"], bodies[-1]["step"]), ("ok", 14))

    def test_failures(self):
        for module, reason in [
            (Module(fail_at=5, error=RuntimeError("CUDA error: an illegal memory access")),
             "RuntimeError: CUDA error: an illegal memory access"),
            (Module(fail_in="configure_optimizers", error=ValueError("no parameters")), "ValueError: no parameters"),
            (Module(fail_in="sanity", error=KeyError("labels")), "KeyError: 'labels'"),
        ]:
            with self.subTest(reason=reason):
                self.exporter.bodies.clear()
                with self.assertRaises(Exception):
                    self.fit(module)
                self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)], [("failed", reason)])

    def test_keyboard_interrupt_is_swallowed_but_fails_the_phase(self):
        self.fit(Module(fail_at=3, error=KeyboardInterrupt()))
        self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)], [("failed", "KeyboardInterrupt")])

    def test_rank_one_failure(self):
        rank = mock.patch.object(pl.Trainer, "global_rank", new_callable=mock.PropertyMock, return_value=1)
        rank.start()
        self.addCleanup(rank.stop)
        with self.assertRaises(RuntimeError):
            self.fit(Module(fail_at=2, error=RuntimeError("NCCL error")))
        self.assertEqual(self.exporter.bodies, [{"phase": "Pretrain 1/3", "event": "end", "status": "failed",
                                                 "reason": "rank 1: RuntimeError: NCCL error"}])


# A fit that a signal stops at batch 4, with a callback that prints the
# hooks Lightning runs on the way out; lavender's callback only when asked.
STOPPED_FIT = """
import os, signal, sys
import torch
import lightning.pytorch as pl
class Spy(pl.Callback):
    def on_exception(self, trainer, module, exc):
        print("on_exception", type(exc).__name__, flush=True)
    def on_train_end(self, trainer, module):
        print("on_train_end", flush=True)
    def teardown(self, trainer, module, stage):
        print("teardown", stage, flush=True)
class M(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
    def training_step(self, batch, i):
        if i == 4:
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return self.layer(batch).sum()
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
callbacks = [Spy()]
if os.environ.get("WITH_LAVENDER"):
    import lavender
    callbacks.insert(0, lavender.lightning.Callback("Pretrain 1/3", every=0.05))
t = pl.Trainer(max_epochs=1, callbacks=callbacks, default_root_dir=sys.argv[2], accelerator="cpu",
               enable_progress_bar=False, enable_model_summary=False, logger=False)
try:
    t.fit(M(), train_dataloaders=torch.utils.data.DataLoader(torch.randn(10, 2), batch_size=1))
finally:
    print("fit left at step", t.global_step, "handler restored:", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
print("after fit", flush=True)
"""


class SignalTest(unittest.TestCase):
    """SIGTERM and SIGINT stop a Lightning run the same way with and
    without lavender: same exit status, same hooks, same step; the phase
    ends failed with the signal."""

    def test_stops_as_lightning_alone_does(self):
        for sig, reason in [("SIGTERM", "SIGTERM"), ("SIGINT", "KeyboardInterrupt")]:
            with self.subTest(signal=sig):
                exporter = Recorder()
                self.addCleanup(exporter.close)
                code = "import sys; sys.argv[1:] = [%r, %r]\n" % (sig, tempfile.mkdtemp()) + STOPPED_FIT
                alone = realfw.run(code)
                watched = realfw.run(code, {"WITH_LAVENDER": "1", "LAVENDER_URL": exporter.url})
                self.assertEqual(watched.returncode, alone.returncode, watched.stderr)
                self.assertEqual(watched.stdout, alone.stdout)
                step = int(alone.stdout.split("fit left at step ")[1].split()[0])
                self.assertIn(step, (4, 5))
                if sig == "SIGTERM":
                    self.assertEqual(alone.returncode, 0, alone.stderr)
                    self.assertIn("on_exception SIGTERMException", alone.stdout)
                self.assertEqual([(b["status"], b["reason"], b["step"]) for b in ends(exporter.bodies)],
                                 [("failed", reason, step)])


if __name__ == "__main__":
    unittest.main()
