"""lavender.hf.Callback under the real TRL 0.7.10 DPOTrainer (on the real
transformers and Debian's torch, CPU only): a policy whose logits go NaN
logs `loss: 0.0` (Trainer's NaN filter) with `rewards/chosen: nan`; lavender
must report the diverged loss, once. Skips like tests.test_real_hf
without $LAVENDER_FRAMEWORKS.

    LAVENDER_FRAMEWORKS=DIR /usr/bin/python3 -m unittest tests.test_real_trl     (in python/)
"""

import shutil
import tempfile
import unittest

from .servers import Recorder
from .test_real_hf import ends, frameworks, run_real

# A one-layer GPT-2 from its config (no download), a character tokenizer
# (the frameworks' set has no tokenizers), and a list with .map standing in
# for datasets.Dataset, which DPOTrainer maps its tokenizer over.
SCRIPT = r"""
import os, sys
import torch
import lavender
from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments
from trl import DPOTrainer

torch.manual_seed(0)

class CharTokenizer:
    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2
    pad_token, eos_token, bos_token = "<pad>", "<eos>", "<bos>"
    padding_side = "right"
    model_input_names = ["input_ids", "attention_mask"]
    def __call__(self, text, add_special_tokens=False, **kw):
        ids = [3 + (ord(c) % 60) for c in text]
        return {"input_ids": ids, "attention_mask": [1] * len(ids)}
    def batch_decode(self, ids, **kw):
        return ["" for _ in ids]
    def save_pretrained(self, *a, **kw):
        return ()

class Rows(list):
    def map(self, fn, **kw):
        return Rows(fn(dict(r)) for r in self)

rows = Rows({"prompt": "q%d: " % i, "chosen": "yes %d" % i, "rejected": "no %d" % (i * 7)} for i in range(32))
config = GPT2Config(vocab_size=64, n_positions=64, n_embd=16, n_layer=1, n_head=2, bos_token_id=1, eos_token_id=2)
model = GPT2LMHeadModel(config)
if os.environ.get("POISON") == "1":
    with torch.no_grad():
        model.lm_head.weight[5, 0] = float("nan")  # every logit row that reads it goes NaN
args = TrainingArguments(output_dir=os.environ["OUT"], max_steps=4, per_device_train_batch_size=4, logging_steps=1,
                         use_cpu=True, report_to=[], save_strategy="no", disable_tqdm=True, remove_unused_columns=False)
trainer = DPOTrainer(model, None, args=args, beta=0.1, train_dataset=rows, tokenizer=CharTokenizer(), max_length=32,
                     max_prompt_length=16, callbacks=[lavender.hf.Callback("DPO", every=0.05)])
trainer.train()
print("logged", [(h.get("loss"), h.get("rewards/chosen")) for h in trainer.state.log_history if "loss" in h])
"""


class RealDPOTest(unittest.TestCase):
    def setUp(self):
        frameworks()
        self.exporter = Recorder()
        self.addCleanup(self.exporter.close)
        self.out = tempfile.mkdtemp(prefix="lavender-dpo-")
        self.addCleanup(shutil.rmtree, self.out, True)

    def run_dpo(self, poison):
        r = run_real(SCRIPT, {"LAVENDER_URL": self.exporter.url, "OUT": self.out, "POISON": "1" if poison else "0"})
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r.stdout.split("logged", 1)[1]

    def test_diverged_dpo_is_reported(self):
        logged = self.run_dpo(poison=True)
        self.assertIn("nan", logged, "the poisoned policy did not diverge: the test shows nothing")
        end = ends(self.exporter.bodies)[-1]
        self.assertEqual((end["status"], end.get("loss")), ("ok", "NaN"), end)

    def test_healthy_dpo_reports_a_finite_loss(self):
        logged = self.run_dpo(poison=False)
        self.assertNotIn("nan", logged)
        losses = [b["loss"] for b in self.exporter.bodies if "loss" in b]
        self.assertTrue(losses and all(isinstance(x, float) for x in losses), losses)


if __name__ == "__main__":
    unittest.main()


class LoggedMetricsTest(unittest.TestCase):
    """Without the frameworks: the callback's on_log alone takes a
    non-finite metric logged beside a finite loss (TRL's rewards/chosen
    while loss reads 0.0) for a diverged loss, and an evaluation's logs
    for nothing."""

    def test_nan_reward_beside_a_zero_loss(self):
        from lavender import hf
        from lavender._phase import Phase

        exporter = Recorder()
        self.addCleanup(exporter.close)
        hooks = hf.Hooks("DPO", every=0.05)
        hooks.phase = Phase("DPO", every=0.05, env={"LAVENDER_URL": exporter.url})
        hooks.phase.start()
        hooks.on_log(None, None, None, logs={"eval_loss": 0.5, "eval_rewards/chosen": 0.1})
        hooks.on_log(None, None, None, logs={"loss": 0.0, "learning_rate": 1e-5, "rewards/chosen": float("nan")})
        hooks.on_log(None, None, None, logs={"loss": 0.0, "learning_rate": 1e-5, "rewards/chosen": 0.2})
        hooks.phase.end()
        end = ends(exporter.bodies)[-1]
        self.assertEqual((end["status"], end.get("loss")), ("ok", "NaN"), "a diverged run stays diverged")
