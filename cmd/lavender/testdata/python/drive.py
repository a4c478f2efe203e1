"""Runs one README snippet the way a training script would, against the
exporter at $LAVENDER_URL, and prints what it saw as one JSON line.

usage: drive.py SNIPPET_FILE KIND OUTCOME
  KIND     plain | hf:Trainer | hf:SFTTrainer | hf:DPOTrainer | lightning
  OUTCOME  ok | fail (the training step raises RuntimeError part-way)

The snippet runs with the names a training script would have defined
(model, args, train_dataset, loader, ...). time.monotonic is a fake clock
that moves 10 s per training step, so the callbacks' 30-second throttle is
exercised without waiting; each step also sleeps a few real milliseconds so
the exporter's wall clock sees the heartbeats apart. While training, the
phase is read from the API at two steps ("probes").
"""

import json
import os
import sys
import time
import urllib.request

snippet_file, kind, outcome = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS, FAIL_AT, PROBE_AT = 40, 30, (20, 36)
PHASE = {"plain": "Pretrain 1/3", "lightning": "Pretrain 1/3"}.get(kind, "Finetune")

fake_now = [1000.0]
time.monotonic = lambda: fake_now[0]

probes = []


def read_phase():
    with urllib.request.urlopen(os.environ["LAVENDER_URL"] + "/api/v1/phases", timeout=5) as r:
        for p in json.load(r)["phases"]:
            if p["name"] == PHASE:
                return p
    return None


def training_step(step):
    """One step of training: step counts from 0."""
    if outcome == "fail" and step == FAIL_AT:
        raise RuntimeError("boom: loss is nan")
    fake_now[0] += 10
    time.sleep(0.02 if kind == "plain" else 0.005)
    if step in PROBE_AT:
        probes.append(read_phase())


names = {"__name__": "__main__"}
if kind == "plain":
    import lavender_phase
    # The README's loop uses the default 60 s pinger; a test cannot wait
    # minutes, so the pinger runs every 50 ms here.
    lavender_phase.phase.__wrapped__.__defaults__ = (0.05,)
    epochs, loader = 2, list(range(STEPS // 2))
    step_no = iter(range(STEPS))
    names.update(epochs=epochs, loader=loader, train_step=lambda batch: training_step(next(step_no)))
elif kind.startswith("hf:"):
    import transformers
    import trl
    trainer_class = getattr(transformers, "Trainer", None) if kind == "hf:Trainer" else getattr(trl, kind[3:])
    names.update(Trainer=trainer_class, model=training_step,
                 args=transformers.TrainingArguments(num_train_epochs=2, eval_steps=10),
                 train_dataset=list(range(STEPS // 2)))
elif kind == "lightning":
    class Model:
        def training_step(self, batch, batch_idx):
            training_step(batch)
    names.update(model=Model(), train_loader=None)
    # 3 epochs of 14 batches, as the README's max_epochs=3 asks; the
    # batches are numbered across epochs, so a batch is its step.
    class Loader:
        def __init__(self):
            self.n = 0
        def __len__(self):
            return 14
        def __iter__(self):
            for _ in range(len(self)):
                yield self.n
                self.n += 1
    names["train_loader"] = Loader()
else:
    sys.exit(f"unknown kind {kind}")

error = None
try:
    exec(compile(open(snippet_file).read(), snippet_file, "exec"), names)
except RuntimeError as e:
    error = str(e)
print(json.dumps({"probes": probes, "error": error}))
