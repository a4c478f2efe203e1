"""lavender.hf.Callback under the real transformers Trainer (4.38-dev, with
accelerate 0.26, on Debian's torch) and TRL 0.7.10's SFTTrainer: a run's
phase with evaluation and checkpoint sizes, a failure, and SIGTERM and
SIGINT stopping the run as they do without lavender."""

import os
import signal
import tempfile
import unittest
from unittest import mock

from . import realfw
from .servers import Recorder

realfw.frameworks()

import lavender  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

transformers.logging.set_verbosity_error()


def ends(bodies):
    return [b for b in bodies if b["event"] == "end"]


def pings(bodies):
    return [b for b in bodies if b["event"] == "ping"]


# A model and data small enough for a CPU: the Trainer calls it with the
# batch's keys and reads the loss from its output.
MODEL = """
import torch, transformers
class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(4, 1)
    def forward(self, x, labels):
        return {"loss": torch.nn.functional.mse_loss(self.layer(x).squeeze(-1), labels)}
def data(n):
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(4, generator=g), "labels": torch.tensor(1.0)} for _ in range(n)]
def args(out, **kw):
    base = dict(output_dir=out, per_device_train_batch_size=2, per_device_eval_batch_size=2, use_cpu=True,
                report_to=[], save_safetensors=False, disable_tqdm=True, logging_steps=1)
    base.update(kw)
    return transformers.TrainingArguments(**base)
"""
exec(MODEL)


class TrainerTest(unittest.TestCase):
    def setUp(self):
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        patch = mock.patch.dict(os.environ, {"LAVENDER_URL": self.exporter.url})
        patch.start()
        self.addCleanup(patch.stop)
        for k in ("RANK", "LOCAL_RANK", "LAVENDER_PHASE", "SLURM_PROCID"):
            os.environ.pop(k, None)
        self.out = tempfile.mkdtemp()

    def test_train_with_evaluation_and_saves(self):
        cb = lavender.hf.Callback("Finetune", every=0.02)
        trainer = transformers.Trainer(model=Tiny(), args=args(self.out, max_steps=6, evaluation_strategy="steps",
                                                                eval_steps=3, save_steps=3),
                                       train_dataset=data(12), eval_dataset=data(6), callbacks=[cb])
        self.assertEqual(self.exporter.bodies, [], "on_init_end only arms the phase")
        trainer.train()
        bodies = self.exporter.bodies
        start, end = bodies[0], bodies[-1]
        self.assertEqual((start["event"], start["step"], start["total"]), ("start", 0, 6))
        self.assertEqual(start["dirs"], [os.getcwd(), self.out])
        self.assertEqual((end["event"], end["status"], end["step"], end["total"]), ("end", "ok", 6, 6))
        self.assertIsInstance(end["loss"], float)
        saves = [b["save_bytes"] for b in pings(bodies) if "save_bytes" in b]
        sizes = []
        for step in (3, 6):
            d = os.path.join(self.out, "checkpoint-%d" % step)
            sizes.append(sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs))
        self.assertEqual(saves, sizes, "each checkpoint is measured once, whole")
        self.assertTrue(all(b["dirs"][-1] == self.out for b in pings(bodies) if "save_bytes" in b),
                        "a save is booked on output_dir's filesystem")

    def test_trl_sft_trainer(self):
        # SFTTrainer passes a torch Dataset through untokenized; a stand-in
        # tokenizer is enough, since no text is read.
        class Tokenizer:
            padding_side, model_max_length, pad_token, eos_token = "right", 64, "<pad>", "<eos>"

        class Rows(torch.utils.data.Dataset):
            def __init__(self, rows):
                self.rows = rows

            def __len__(self):
                return len(self.rows)

            def __getitem__(self, i):
                return self.rows[i]

        import trl

        cb = lavender.hf.Callback("SFT", every=0.02)
        trainer = trl.SFTTrainer(model=Tiny(), args=args(self.out, max_steps=4), train_dataset=Rows(data(8)),
                                 tokenizer=Tokenizer(), dataset_text_field="text", max_seq_length=8,
                                 data_collator=transformers.default_data_collator, callbacks=[cb])
        trainer.train()
        bodies = self.exporter.bodies
        self.assertEqual([(b["event"], b.get("status"), b["step"], b["total"]) for b in (bodies[0], bodies[-1])],
                         [("start", None, 0, 4), ("end", "ok", 4, 4)])
        self.assertIsInstance(bodies[-1]["loss"], float)

    def test_failure_in_training(self):
        class Broken(Tiny):
            def forward(self, x, labels):
                raise ValueError("shape mismatch")

        cb = lavender.hf.Callback("Finetune", every=0.02)
        trainer = transformers.Trainer(model=Broken(), args=args(self.out, max_steps=4), train_dataset=data(8),
                                       callbacks=[cb])
        with self.assertRaises(ValueError):
            try:
                trainer.train()
            except ValueError as e:
                cb.failed(e)
                raise
        self.assertEqual([(b["status"], b["reason"], b["step"]) for b in ends(self.exporter.bodies)],
                         [("failed", "ValueError: shape mismatch", 0)])


STOPPED_TRAIN = MODEL + """
import os, signal, sys
class Spy(transformers.TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        print("step", state.global_step, flush=True)
        if state.global_step == 3:
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
callbacks = [Spy()]
if os.environ.get("WITH_LAVENDER"):
    import lavender
    callbacks.insert(0, lavender.hf.Callback("Finetune", every=0.05))
t = transformers.Trainer(model=Tiny(), args=args(sys.argv[2], max_steps=8), train_dataset=data(16),
                         callbacks=callbacks)
t.train()
print("after train", flush=True)
"""


class SignalTest(unittest.TestCase):
    def test_stops_as_without_lavender(self):
        for sig, reason in [("SIGTERM", "SIGTERM"), ("SIGINT", "KeyboardInterrupt")]:
            with self.subTest(signal=sig):
                exporter = Recorder()
                self.addCleanup(exporter.close)
                code = "import sys; sys.argv[1:] = [%r, %r]\n" % (sig, tempfile.mkdtemp()) + STOPPED_TRAIN
                alone = realfw.run(code)
                watched = realfw.run(code, {"WITH_LAVENDER": "1", "LAVENDER_URL": exporter.url})
                self.assertEqual(alone.returncode, -getattr(signal, sig), alone.stderr)
                self.assertEqual(watched.returncode, alone.returncode, watched.stderr)
                self.assertEqual(watched.stdout, alone.stdout)
                self.assertEqual([(b["status"], b["reason"], b["step"]) for b in ends(exporter.bodies)],
                                 [("failed", reason, 3)])


if __name__ == "__main__":
    unittest.main()
