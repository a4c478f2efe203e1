"""lavender.hf.Callback under the real transformers (4.38-dev, with
accelerate 0.26) on Debian's torch, CPU only: a failure after the phase
ended ok, a custom compute_loss going NaN behind Trainer's NaN filter, a
failure in train() before training begins, and a slow compute_metrics.

$LAVENDER_FRAMEWORKS names the directory holding the frameworks (the
tarball of ../shared/frameworks/, extracted); without it these tests skip,
saying why, and under LAVENDER_E2E=1 they fail instead.

    LAVENDER_FRAMEWORKS=DIR /usr/bin/python3 -m unittest tests.test_real_hf     (in python/)
"""

import json
import shutil
import tempfile
import unittest

from .realfw import frameworks, run
from .servers import Recorder


def run_real(code, env=None, timeout=240):
    """realfw.run with transformers kept offline, quiet and on one thread."""
    quiet = dict(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
                 TRANSFORMERS_OFFLINE="1", WANDB_DISABLED="true")
    quiet.update(env or {})
    return run(code, quiet, timeout=timeout)


def ends(bodies):
    return [b for b in bodies if b["event"] == "end"]


# A regression model small enough for a CPU, a list of examples as the
# dataset (Trainer needs no datasets.Dataset), and arguments that log every
# step and write nothing but output_dir.
PRELUDE = r"""
import math, os, sys, time, threading
import torch
import lavender
from transformers import Trainer, TrainingArguments, TrainerCallback

torch.manual_seed(0)

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)
    def forward(self, x, labels=None):
        out = self.lin(x)
        if labels is None:
            return {"logits": out}
        return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

data = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(64)]

def arguments(out, **kw):
    base = dict(output_dir=out, max_steps=6, per_device_train_batch_size=4, logging_steps=1, use_cpu=True,
                report_to=[], save_strategy="no", disable_tqdm=True)
    base.update(kw)
    return TrainingArguments(**base)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.environ["OUT"]
"""


class RealHFTest(unittest.TestCase):
    def setUp(self):
        frameworks()
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        self.out = tempfile.mkdtemp(prefix="lavender-hf-")
        self.addCleanup(shutil.rmtree, self.out, True)
        self.env = {"LAVENDER_URL": self.exporter.url, "OUT": self.out}

    def run_script(self, body):
        return run_real(PRELUDE + body, self.env)

    def test_callback_after_ours_raising_in_on_train_end(self):
        r = self.run_script(r"""
class Upload(TrainerCallback):
    def on_train_end(self, args, state, control, **kwargs):
        raise RuntimeError("model card upload failed")

trainer = Trainer(model=Tiny(), args=arguments(OUT), train_dataset=data,
                  callbacks=[lavender.hf.Callback("Finetune", every=0.05), Upload()])
trainer.train()
""")
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertEqual([(b["status"], b.get("reason")) for b in ends(self.exporter.bodies)],
                         [("ok", None), ("failed", "RuntimeError: model card upload failed")])

    def test_save_model_failing_after_train(self):
        r = self.run_script(r"""
trainer = Trainer(model=Tiny(), args=arguments(OUT), train_dataset=data,
                  callbacks=[lavender.hf.Callback("Finetune", every=0.05)])
trainer.train()
open(os.path.join(OUT, "final"), "w").close()
trainer.save_model(os.path.join(OUT, "final", "model"))  # final is a file: NotADirectoryError
""")
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        got = [(b["status"], b.get("reason", "")) for b in ends(self.exporter.bodies)]
        self.assertEqual([s for s, _ in got], ["ok", "failed"], got)
        self.assertTrue(got[1][1].startswith(("NotADirectoryError", "FileExistsError")), got)

    def test_failure_in_train_before_training_begins(self):
        # What docs/python.md gives as on_init_end's example: train() fails
        # before on_train_begin, after Trainer(...) armed the phase.
        r = self.run_script(r"""
trainer = Trainer(model=Tiny(), args=arguments(OUT), train_dataset=data,
                  callbacks=[lavender.hf.Callback("Finetune", every=0.05)])
trainer.train(resume_from_checkpoint=os.path.join(OUT, "no-such-checkpoint"))
""")
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        got = [(b["status"], b.get("reason", "")) for b in ends(self.exporter.bodies)]
        self.assertEqual(len(got), 1, got)
        self.assertEqual(got[0][0], "failed")
        self.assertIn("Can't find a valid checkpoint", got[0][1])

    def test_custom_compute_loss_going_nan(self):
        # The model returns no loss; compute_loss makes it, and it goes NaN
        # from step 3. Trainer's logging_nan_inf_filter keeps the logged
        # loss finite: lavender must see the NaN all the same.
        r = self.run_script(r"""
class MyTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False):
        out = model(inputs["x"])
        loss = torch.nn.functional.mse_loss(out["logits"], inputs["labels"])
        if self.state.global_step >= 2:
            loss = loss * float("nan")
        return (loss, out) if return_outputs else loss

trainer = MyTrainer(model=Tiny(), args=arguments(OUT), train_dataset=data,
                    callbacks=[lavender.hf.Callback("Finetune", every=0.05)])
trainer.train()
print("logged", [h["loss"] for h in trainer.state.log_history if "loss" in h])
""")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        logged = r.stdout.split("logged", 1)[1]
        self.assertNotIn("nan", logged, "the logged loss was not filtered: the test shows nothing")
        end = ends(self.exporter.bodies)[-1]
        self.assertEqual((end["status"], end.get("loss")), ("ok", "NaN"), end)

    def test_slow_compute_metrics_is_busy_and_a_hang_in_it_is_not(self):
        # compute_metrics works in Python for a while (busy pings), then
        # blocks without using the CPU (no busy pings: the server's stall
        # rule sees a hang inside it).
        r = self.run_script(r"""
marks = {}
def compute_metrics(pred):
    marks["metrics"] = time.monotonic()
    n, until = 0, time.monotonic() + 0.8
    while time.monotonic() < until:
        n += sum(range(200))
    marks["blocked"] = time.monotonic()
    threading.Event().wait(0.8)
    marks["done"] = time.monotonic()
    return {"n": float(n > 0)}

trainer = Trainer(model=Tiny(), args=arguments(OUT, evaluation_strategy="steps", eval_steps=3, max_steps=3,
                                               per_device_eval_batch_size=32),
                  train_dataset=data, eval_dataset=data[:64], compute_metrics=compute_metrics,
                  callbacks=[lavender.hf.Callback("Finetune", every=0.05)])
trainer.train()
""")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        pings = [b for b in self.exporter.bodies if b["event"] == "ping" and b.get("step") == 3]
        busy = [b.get("busy") for b in pings]
        self.assertIn("evaluating", busy, busy)
        self.assertGreaterEqual(len(busy), 10, busy)
        self.assertGreaterEqual(quiet_run(busy, "evaluating"), 5, "a blocked compute_metrics was reported busy: %s" % busy)

    def test_work_at_the_end_of_an_epoch_is_busy(self):
        # With save_strategy or evaluation_strategy "epoch", DefaultFlowCallback
        # asks for the save or the evaluation in on_epoch_end, not on_step_end:
        # a long save there (a hub push) is work, not a stall, as after a step.
        r = self.run_script(r"""
import json

def spin(seconds):  # a save that works (serialising, uploading)
    n, until = 0, time.monotonic() + seconds
    while time.monotonic() < until:
        n += sum(range(200))

seen = {}
for case, kw in [("steps", dict(save_strategy="steps", save_steps=4)),
                 ("epoch", dict(save_strategy="epoch")),
                 ("eval", dict(save_strategy="no", evaluation_strategy="epoch"))]:
    cb = lavender.hf.Callback("Epochs " + case, every=0.05)
    trainer = Trainer(model=Tiny(), args=arguments(os.path.join(OUT, case), max_steps=-1, num_train_epochs=2,
                                                   save_safetensors=False, **kw),
                      train_dataset=data[:16], eval_dataset=data[:8], callbacks=[cb])
    marks = seen[case] = []
    def watched(work):
        def run(*a, **k):
            marks.append((trainer.state.global_step, cb.phase._busy and cb.phase._busy[0]))
            spin(0.4)
            return work(*a, **k)
        return run
    if case == "eval":
        trainer.evaluate = watched(trainer.evaluate)
    else:
        trainer._save_checkpoint = watched(trainer._save_checkpoint)
    trainer.train()
print(json.dumps(seen))
""")
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        seen = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(seen, {"steps": [[4, "saving"], [8, "saving"]], "epoch": [[4, "saving"], [8, "saving"]],
                                "eval": [[4, "evaluating"], [8, "evaluating"]]})
        for case, what in (("epoch", "saving"), ("eval", "evaluating")):
            busy = [b.get("busy") for b in self.exporter.bodies
                    if b["phase"] == "Epochs " + case and b["event"] == "ping" and b.get("step") == 4]
            self.assertIn(what, busy, "no busy ping while %s at the end of an epoch: %s" % (what, busy))
        self.assertEqual([b["status"] for b in ends(self.exporter.bodies)], ["ok"] * 3)


def quiet_run(busy, what):
    """The longest run of pings without busy after the first that said
    what: a blocked stretch of 0.8 s, pinged every 0.05 s, is one of ten or
    more. Once the block ends the thread moves again and may be busy again
    (a loaded machine shifts where), so the run, not the last pings, is
    what tells."""
    longest = run = 0
    for b in busy[busy.index(what):]:
        run = run + 1 if b is None else 0
        longest = max(longest, run)
    return longest


if __name__ == "__main__":
    unittest.main()
