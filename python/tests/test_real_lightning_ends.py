"""lavender.lightning.Callback under the real Lightning 2.1.4 (Debian's
torch, CPU): a failure after the phase ended ok (a callback after ours
raising in on_train_end, a save after fit()) fails the phase, once, with
its reason; validation's epoch-end metrics are busy work between steps. Skips like tests.test_real_hf without $LAVENDER_FRAMEWORKS.

    LAVENDER_FRAMEWORKS=DIR /usr/bin/python3 -m unittest tests.test_real_lightning_ends     (in python/)
"""

import shutil
import tempfile
import unittest

from .servers import Recorder
from .test_real_hf import ends, frameworks, quiet_run, run_real

PRELUDE = r"""
import os
import torch
import lavender
import lightning.pytorch as pl

class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.lin(x), y)
        self.log("train_loss", loss)
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

torch.manual_seed(0)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)

def trainer(*callbacks):
    return pl.Trainer(max_steps=4, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, default_root_dir=os.environ["OUT"],
                      callbacks=[lavender.lightning.Callback("Pretrain", every=0.05)] + list(callbacks))
"""


class RealLightningEndsTest(unittest.TestCase):
    def setUp(self):
        frameworks()
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        self.out = tempfile.mkdtemp(prefix="lavender-pl-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def run_script(self, body):
        return run_real(PRELUDE + body, {"LAVENDER_URL": self.exporter.url, "OUT": self.out})

    def test_callback_after_ours_raising_in_on_train_end(self):
        r = self.run_script(r"""
class Upload(pl.Callback):
    def on_train_end(self, trainer, pl_module):
        raise RuntimeError("artifact upload failed")

trainer(Upload()).fit(Tiny(), data)
""")
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertEqual([(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)],
                         [("ok", None), ("failed", "RuntimeError: artifact upload failed")])

    def test_save_after_fit_failing(self):
        r = self.run_script(r"""
t = trainer()
t.fit(Tiny(), data)
open(os.path.join(os.environ["OUT"], "final"), "w").close()
t.save_checkpoint(os.path.join(os.environ["OUT"], "final", "last.ckpt"))  # final is a file
""")
        self.assertNotEqual(r.returncode, 0, r.stderr[-2000:])
        got = [(b["status"], b.get("reason", "")) for b in ends(self.exporter.bodies)]
        self.assertEqual([s for s, _ in got], ["ok", "failed"], got)

    def test_validate_failing_after_fit(self):
        # Lightning calls on_exception for trainer.validate too: a caught
        # failure there leaves the fit ended ok.
        r = self.run_script(r"""
class Broken(Tiny):
    def validation_step(self, batch, batch_idx):
        raise ValueError("bad validation batch")

t = trainer()
t.fit(Broken(), data)
try:
    t.validate(Broken(), data)
except ValueError as e:
    print("caught", e)
""")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertIn("caught bad validation batch", r.stdout)
        self.assertEqual([(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)], [("ok", None)])


class RealLightningBusyTest(unittest.TestCase):
    """Validation's epoch-end metrics are work between steps: busy while
    they run Python, not once they block."""

    def setUp(self):
        frameworks()
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        self.out = tempfile.mkdtemp(prefix="lavender-pl-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def test_slow_validation_metrics(self):
        r = run_real(PRELUDE + r"""
import threading, time

class Validated(Tiny):
    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.lin(x), y))
    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        n, until = 0, time.monotonic() + 0.8
        while time.monotonic() < until:
            n += sum(range(200))
        threading.Event().wait(0.8)

t = pl.Trainer(max_steps=4, val_check_interval=4, num_sanity_val_steps=0, accelerator="cpu", devices=1, logger=False,
               enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
               default_root_dir=os.environ["OUT"], callbacks=[lavender.lightning.Callback("Pretrain", every=0.05)])
t.fit(Validated(), data, data)
""", {"LAVENDER_URL": self.exporter.url, "OUT": self.out})
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        busy = [b.get("busy") for b in self.exporter.bodies if b["event"] == "ping" and b.get("step") == 4]
        self.assertIn("validating", busy, busy)
        self.assertGreaterEqual(len(busy), 10, busy)
        self.assertGreaterEqual(quiet_run(busy, "validating"), 5, "a blocked validation was reported busy: %s" % busy)


if __name__ == "__main__":
    unittest.main()
