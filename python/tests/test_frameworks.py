"""lavender.hf.Callback through stand-ins of transformers and TRL
(tests/frameworks) that call the hooks in the order Trainer does, for what
the real frameworks cannot run on cue here: a failure injected into
accelerate's prepare, a loss filtered to 0.0 by logging_nan_inf_filter, and
a rank other than 0 without starting ranks. The real Trainer, SFTTrainer,
DPOTrainer and Lightning run in test_real_*.py; the Lightning stand-in stays
for cmd/lavender's TestPythonDocSnippets, which runs the docs' recipes with
any python3, torch or not."""

import math
import os
import signal
import sys
import tempfile
import unittest
from unittest import mock

from .servers import FRAMEWORKS, Recorder, run_python

if FRAMEWORKS not in sys.path:
    sys.path.insert(0, FRAMEWORKS)

import lavender  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402


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
        for cls in (transformers.Trainer, trl.DPOTrainer):
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


class LightningHooksTest(Base):
    """lavender.lightning.Hooks driven as the real Lightning does, with
    trainer.state.fn saying which of the trainer's functions runs."""

    def trainer(self, fn):
        from types import SimpleNamespace
        return SimpleNamespace(state=SimpleNamespace(fn=SimpleNamespace(value=fn)), global_rank=0, global_step=0,
                               default_root_dir=self.out, checkpoint_callbacks=[], ckpt_path=None,
                               estimated_stepping_batches=4, callback_metrics={})

    def test_exception_in_validate_after_fit_is_not_the_fits(self):
        from lavender.lightning import Hooks
        hooks, t = Hooks("Pretrain", every=0.05), self.trainer("fit")
        hooks.setup(t, None, "fit")
        hooks.on_fit_start(t, None)
        hooks.on_train_start(t, None)
        t.global_step = 4
        hooks.on_train_end(t, None)
        hooks.teardown(t, None, "fit")
        t.state.fn.value = "validate"
        hooks.setup(t, None, "validate")
        hooks.on_exception(t, None, ValueError("bad batch"))
        hooks.teardown(t, None, "validate")
        self.assertEqual([(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)], [("ok", None)])

    def test_exception_in_fit_fails_it(self):
        from lavender.lightning import Hooks
        hooks, t = Hooks("Pretrain", every=0.05), self.trainer("fit")
        hooks.setup(t, None, "fit")
        hooks.on_fit_start(t, None)
        hooks.on_exception(t, None, ValueError("bad batch"))
        hooks.teardown(t, None, "fit")
        self.assertEqual([(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)],
                         [("failed", "ValueError: bad batch")])


class LazyImportTest(unittest.TestCase):
    def test_no_framework_until_used(self):
        r = run_python("import sys, lavender, lavender.hf, lavender.lightning\n"
                       "print(sorted(m for m in ('transformers', 'lightning', 'pytorch_lightning', 'torch') if m in sys.modules))\n"
                       "lavender.hf.Callback\n"
                       "print('transformers' in sys.modules)\n")
        self.assertEqual(r.stdout, "[]\nTrue\n", r.stderr)


if __name__ == "__main__":
    unittest.main()
