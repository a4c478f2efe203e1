"""Runs one docs/python.md snippet the way a training script would, with
the lavender package, against the exporter at $LAVENDER_URL, and prints what
it saw as one JSON line (also when training raises: then through
sys.excepthook, which lavender chains, and the exit status is 1).

usage: drive.py SNIPPET_FILE KIND OUTCOME
  KIND     plain | hf:Trainer | hf:SFTTrainer | hf:DPOTrainer | lightning
  OUTCOME  ok | fail (the training step raises RuntimeError part-way)

The snippet runs with the names a training script would have defined
(model, args, train_dataset, loader, ...), through the framework stand-ins
of python/tests/frameworks. The snippets ping every 60 s; a test cannot
wait minutes, so every phase pings every 50 ms here. Each step sleeps a few
milliseconds so the exporter's wall clock sees the heartbeats apart. While
training, the phase is read from the API at two steps ("probes").
"""

import json
import os
import sys
import time
import urllib.request

import lavender._phase

snippet_file, kind, outcome = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS, FAIL_AT, PROBE_AT = 40, 30, (20, 36)
PHASE = {"plain": "Pretrain 1/3", "lightning": "Pretrain 1/3"}.get(kind, "Finetune")

_init = lavender._phase.Phase.__init__


def fast(self, name, every=60, *args, **kwargs):
    _init(self, name, 0.05, *args, **kwargs)


lavender._phase.Phase.__init__ = fast

probes = []


def report(error=None):
    print(json.dumps({"probes": probes, "error": error}), flush=True)


def excepthook(exc_type, exc, tb):
    report("%s: %s" % (exc_type.__name__, exc))
    sys.exit(1)


sys.excepthook = excepthook


def read_phase():
    # The snippet's Phase posts from a thread; give its first pings a moment.
    time.sleep(0.12)
    with urllib.request.urlopen(os.environ["LAVENDER_URL"] + "/api/v1/phases", timeout=5) as r:
        for p in json.load(r)["phases"]:
            if p["name"] == PHASE:
                return p
    return None


def training_step(step):
    """One step of training: step counts from 0. Returns the loss."""
    if outcome == "fail" and step == FAIL_AT:
        raise RuntimeError("boom: loss is nan")
    time.sleep(0.02)
    if step in PROBE_AT:
        probes.append(read_phase())
    return 1.0 / (step + 1)


names = {"__name__": "__main__"}
if kind == "plain":
    epochs, loader = 2, list(range(STEPS // 2))
    step_no = iter(range(STEPS))
    names.update(epochs=epochs, loader=loader, train_step=lambda batch: training_step(next(step_no)))
elif kind.startswith("hf:"):
    import transformers
    import trl
    trainer_class = transformers.Trainer if kind == "hf:Trainer" else getattr(trl, kind[3:])
    names.update(Trainer=trainer_class, SFTTrainer=trl.SFTTrainer, DPOTrainer=trl.DPOTrainer, model=training_step,
                 args=transformers.TrainingArguments(output_dir=os.path.join(os.getcwd(), "out"), num_train_epochs=2,
                                                     eval_steps=10, logging_steps=5),
                 train_dataset=list(range(STEPS // 2)))
elif kind == "lightning":
    import lightning.pytorch as pl

    class Model(pl.LightningModule):
        def training_step(self, batch, batch_idx):
            return {"loss": training_step(batch)}

    # 3 epochs of 14 batches, as the snippet's max_epochs=3 asks; the
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

    names.update(model=Model(), train_loader=Loader())
else:
    sys.exit("unknown kind " + kind)

exec(compile(open(snippet_file).read(), snippet_file, "exec"), names)
report()
