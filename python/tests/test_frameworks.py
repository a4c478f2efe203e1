"""The callbacks through framework stand-ins that call the hooks in the
order transformers' Trainer and Lightning's Trainer do (tests/frameworks)."""

import math
import os
import signal
import sys
import tempfile
import time
import unittest
from unittest import mock

from .servers import FRAMEWORKS, Recorder, run_python

if FRAMEWORKS not in sys.path:
    sys.path.insert(0, FRAMEWORKS)

import lavender  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
import lightning.pytorch as pl  # noqa: E402


def ends(bodies):
    return [b for b in bodies if b["event"] == "end"]


def pings(bodies):
    return [b for b in bodies if b["event"] == "ping"]


class Base(unittest.TestCase):
    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        patch = mock.patch.dict(os.environ, {"LAVENDER_URL": self.exporter.url})
        patch.start()
        self.addCleanup(patch.stop)
        for k in ("RANK", "LOCAL_RANK", "LAVENDER_PHASE", "SLURM_PROCID"):
            os.environ.pop(k, None)
        self.out = tempfile.mkdtemp()


class NaNModel(transformers.PreTrainedModel):
    def __init__(self, nan_from):
        super().__init__()
        self.nan_from = nan_from

    def forward(self, step):
        return transformers.ModelOutput(loss=math.nan if step >= self.nan_from else 1.0 / (step + 1))


class HFTest(Base):
    def trainer(self, cls=transformers.Trainer, model=None, **args):
        args.setdefault("output_dir", self.out)
        cb = lavender.hf.Callback("Finetune", every=0.02)
        return cb, cls(model=model or NaNModel(10 ** 9), args=transformers.TrainingArguments(**args),
                       train_dataset=list(range(10)), callbacks=[cb])

    def test_train(self):
        for cls in (transformers.Trainer, trl.SFTTrainer, trl.DPOTrainer):
            with self.subTest(cls=cls.__name__):
                self.exporter.bodies.clear()
                cb, trainer = self.trainer(cls, num_train_epochs=2, eval_steps=10, save_steps=10, logging_steps=5,
                                           eval_batches=5, eval_seconds=0.5, step_seconds=0.01)
                self.assertEqual(self.exporter.bodies, [], "on_init_end only arms the phase")
                trainer.train()
                bodies = self.exporter.bodies
                start, end = bodies[0], bodies[-1]
                self.assertEqual((start["event"], start["step"], start["total"]), ("start", 0, 20))
                self.assertEqual(start["dirs"], [os.getcwd(), self.out])
                self.assertEqual((end["event"], end["status"], end["step"], end["total"]), ("end", "ok", 20, 20))
                evals = [b["eval_step"] for b in pings(bodies) if "eval_step" in b]
                self.assertTrue(evals and all(b.get("eval_total") == 5 for b in pings(bodies) if "eval_step" in b), bodies)
                self.assertGreater(len(set(evals)), 1, "the evaluation's progress did not move")
                saves = [b["save_bytes"] for b in pings(bodies) if "save_bytes" in b]
                self.assertEqual(saves, [4096, 4096], "each checkpoint is measured once")
                self.assertAlmostEqual(end["loss"], 1.0 / 20)

    def test_nan_loss_is_seen_despite_logging_nan_inf_filter(self):
        logged = []

        class Spy(transformers.TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kwargs):
                logged.append(logs.get("loss"))

        cb, trainer = self.trainer(model=NaNModel(0), logging_steps=5, step_seconds=0.01)
        trainer.add_callback(Spy())
        trainer.train()
        self.assertEqual(logged[0], 0.0, "the stand-in's filter should log a NaN first step as 0.0")
        self.assertEqual(ends(self.exporter.bodies)[0]["loss"], "NaN")
        self.assertTrue(any(b.get("loss") == "NaN" for b in pings(self.exporter.bodies)))

    def test_logged_loss_without_a_model_loss(self):
        cb, trainer = self.trainer(model=lambda step: 0.25, logging_steps=5)
        trainer.train()
        self.assertEqual(ends(self.exporter.bodies)[0]["loss"], 0.25)

    def test_failure_before_train_begin(self):
        code = ("import lavender, transformers\n"
                "args = transformers.TrainingArguments(output_dir=%r, prepare_error='accelerate: FSDP wrap failed')\n"
                "t = transformers.Trainer(model=lambda s: 1.0, args=args, train_dataset=[1, 2],\n"
                "                         callbacks=[lavender.hf.Callback('Finetune')])\n"
                "t.train()\n" % self.out)
        r = run_python(code, {"LAVENDER_URL": self.exporter.url})
        self.assertEqual(r.returncode, 1)
        self.assertIn("RuntimeError: accelerate: FSDP wrap failed", r.stderr)
        self.assertEqual([(b["event"], b["status"], b["reason"]) for b in self.exporter.bodies],
                         [("end", "failed", "RuntimeError: accelerate: FSDP wrap failed")])

    def test_failure_in_training_and_sigterm(self):
        fail = ("import lavender, os, signal, transformers\n"
                "def model(step):\n"
                "    if step == 5:\n"
                "        %s\n"
                "    return 1.0\n"
                "args = transformers.TrainingArguments(output_dir=%r)\n"
                "t = transformers.Trainer(model=model, args=args, train_dataset=list(range(10)),\n"
                "                         callbacks=[lavender.hf.Callback('Finetune', every=0.05)])\n"
                "t.train()\n")
        for action, rc, reason in [("raise ValueError('shape mismatch')", 1, "ValueError: shape mismatch"),
                                   ("os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM, "SIGTERM")]:
            with self.subTest(action=action):
                self.exporter.bodies.clear()
                r = run_python(fail % (action, self.out), {"LAVENDER_URL": self.exporter.url})
                self.assertEqual(r.returncode, rc, r.stderr)
                self.assertEqual([(b["status"], b["reason"], b["step"]) for b in ends(self.exporter.bodies)],
                                 [("failed", reason, 5)])

    def test_other_rank(self):
        os.environ["RANK"] = "1"
        cb, trainer = self.trainer()
        trainer.train()
        self.assertEqual(self.exporter.bodies, [])


class Module(pl.LightningModule):
    def __init__(self, fail_at=None, error=RuntimeError("boom"), fail_in=None):
        super().__init__()
        self.fail_at, self.error, self.fail_in = fail_at, error, fail_in

    def configure_optimizers(self):
        if self.fail_in == "configure_optimizers":
            raise self.error

    def training_step(self, batch, batch_idx):
        if batch == self.fail_at:
            raise self.error
        time.sleep(0.01)
        self.log("train_loss", 1.0 / (batch + 1))
        return {"loss": 1.0 / (batch + 1)}

    def validation_step(self, batch, batch_idx):
        if self.fail_in == "sanity" and self.trainer.sanity_checking:
            raise self.error


class LightningTest(Base):
    def fit(self, module, epochs=2, val=True):
        trainer = pl.Trainer(max_epochs=epochs, callbacks=[lavender.lightning.Callback("Pretrain 1/3", every=0.02)],
                             default_root_dir=self.out)
        trainer.fit(module, train_dataloaders=list(range(7)), val_dataloaders=list(range(3)) if val else None)
        return trainer

    def test_fit(self):
        self.fit(Module())
        bodies = self.exporter.bodies
        self.assertEqual((bodies[0]["event"], bodies[0]["dirs"]), ("start", [os.getcwd(), self.out]))
        end = bodies[-1]
        self.assertEqual((end["event"], end["status"], end["step"], end["total"]), ("end", "ok", 14, 14))
        self.assertAlmostEqual(end["loss"], 1.0 / 7)
        self.assertTrue(any(b.get("step") == 0 and b.get("total") == 14 for b in pings(bodies)), "no step 0 at train start")
        saves = [b["save_bytes"] for b in pings(bodies) if "save_bytes" in b]
        self.assertEqual(saves, [2048, 2048])

    def test_validation_progress(self):
        module = Module()
        module.validation_step = lambda batch, i: time.sleep(0.1)
        self.fit(module, epochs=1)
        evals = [(b["eval_step"], b.get("eval_total")) for b in pings(self.exporter.bodies) if "eval_step" in b]
        self.assertIn(3, [t for _, t in evals], "validation batches not reported")
        self.assertIn(2, [t for _, t in evals], "sanity check batches not reported")

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
                if "no parameters" in reason:
                    self.assertEqual(self.exporter.events(), [("end", "failed")],
                                     "configure_optimizers fails before the start: only the failed end")

    def test_keyboard_interrupt_is_swallowed_but_fails_the_phase(self):
        self.fit(Module(fail_at=3, error=KeyboardInterrupt()))
        self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)], [("failed", "KeyboardInterrupt")])

    def test_sigterm_exits_zero_but_fails_the_phase(self):
        code = ("import lavender, os, signal\n"
                "import lightning.pytorch as pl\n"
                "class M(pl.LightningModule):\n"
                "    def training_step(self, batch, i):\n"
                "        if batch == 4:\n"
                "            os.kill(os.getpid(), signal.SIGTERM)\n"
                "        return {'loss': 0.5}\n"
                "t = pl.Trainer(max_epochs=1, callbacks=[lavender.lightning.Callback('Pretrain 1/3', every=0.05)],\n"
                "               default_root_dir=%r)\n"
                "t.fit(M(), train_dataloaders=list(range(10)))\n" % self.out)
        r = run_python(code, {"LAVENDER_URL": self.exporter.url})
        self.assertEqual(r.returncode, 0, "Lightning's own SIGTERM handler was not kept: " + r.stderr)
        self.assertEqual([(b["status"], b["reason"]) for b in ends(self.exporter.bodies)], [("failed", "SIGTERM")])

    def test_rank_one_failure(self):
        os.environ["RANK"] = "1"
        with self.assertRaises(RuntimeError):
            self.fit(Module(fail_at=2, error=RuntimeError("NCCL error")))
        self.assertEqual(self.exporter.bodies, [{"phase": "Pretrain 1/3", "event": "end", "status": "failed",
                                                 "reason": "rank 1: RuntimeError: NCCL error"}])


class LazyImportTest(unittest.TestCase):
    def test_no_framework_until_used(self):
        r = run_python("import sys, lavender, lavender.hf, lavender.lightning\n"
                       "print(sorted(m for m in ('transformers', 'lightning', 'pytorch_lightning', 'torch') if m in sys.modules))\n"
                       "lavender.hf.Callback\n"
                       "print('transformers' in sys.modules)\n")
        self.assertEqual(r.stdout, "[]\nTrue\n", r.stderr)


if __name__ == "__main__":
    unittest.main()
