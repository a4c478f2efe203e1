"""PyTorch Lightning (lightning.pytorch or pytorch_lightning):
lavender.lightning.Callback.

    trainer = pl.Trainer(..., callbacks=[lavender.lightning.Callback("Pretrain 1/3")])
    trainer.fit(model, train_loader)

Lightning is imported when Callback is first used: the package the program
already imported if there is one, else lightning.pytorch, else
pytorch_lightning.
"""

import math
import sys

from . import _phase, _wire

# callback_metrics keys that hold the training loss, most specific first.
LOSS_KEYS = ("train_loss_step", "train_loss", "loss", "train/loss", "training_loss")


class Hooks:
    """The callback's behaviour, apart from Lightning's Callback base so
    this module imports without it.

    setup("fit")     arms the phase: a failure in configure_optimizers or the
                     sanity check ends it failed (Lightning calls on_exception).
    on_fit_start     starts it, at step 0 unless resuming. SIGTERM stops the
                     run as Lightning alone would (at the next batch, exit
                     status 0, on_exception callbacks and logger finalize
                     run); the phase ends failed with "SIGTERM".
    on_train_start   records global_step and estimated_stepping_batches.
    on_train_batch_end
                     records the step and the loss (callback_metrics, else the
                     training_step's loss).
    on_validation_batch_end, on_validation_end
                     record validation batches (the sanity check's too): a
                     long validation is movement, a hung one a stall; the
                     epoch-end metrics after them are busy work.
    on_save_checkpoint
                     measures the checkpoint once written, off the training
                     thread; the write is busy work.
    on_train_end     ends the phase ok.
    on_exception     ends it failed with the exception's line (Lightning
                     swallows KeyboardInterrupt and turns SIGTERM into an exit
                     status 0: the phase still says failed); one raised in
                     trainer.validate, test or predict is not the fit's.
    teardown         ends a phase still running.
    """

    def __init__(self, name, every=60):
        self.name, self.every = name, every
        self.phase = None
        self._total = None
        self._eval_batches = 0
        self._saving = False
        self._seen_checkpoints = {}

    def setup(self, trainer, pl_module, stage=None):
        if stage is not None and str(getattr(stage, "value", stage)) != "fit":
            return
        if self.phase is None or self.phase.ended:
            rank = _wire.count(getattr(trainer, "global_rank", None))
            self.phase = _phase.Phase(self.name, every=self.every, dirs=[getattr(trainer, "default_root_dir", None)],
                                      rank=rank)
        self.phase.add_dirs(*_checkpoint_dirs(trainer))
        # Lightning owns SIGTERM during the fit (its handler stops the run at
        # the next batch, exit status 0): the phase learns of it from the
        # exception Lightning raises, and sets no handler of its own.
        self.phase.arm(sigterm=False)

    def on_fit_start(self, trainer, pl_module):
        if self.phase is None:
            self.setup(trainer, pl_module, "fit")
        # By now every ModelCheckpoint has set up its dirpath (a default
        # one under the logger's directory).
        self.phase.add_dirs(*_checkpoint_dirs(trainer))
        # A fresh fit is at step 0 from here, through the sanity check (the
        # first step's wait); a resumed one learns its step at train start.
        self.phase.steps_from_zero = not getattr(trainer, "ckpt_path", None)
        self.phase.start()

    def on_train_start(self, trainer, pl_module):
        if self.phase is None:
            self.on_fit_start(trainer, pl_module)
        self._total = _stepping_batches(trainer)
        self.phase.progress(trainer.global_step, self._total)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        if self._saving:
            self._check_saved(trainer)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        if self.phase is not None:
            self.phase.progress(trainer.global_step, self._total, loss=_loss(trainer, outputs))

    def on_train_epoch_end(self, trainer, pl_module):
        if self._saving:
            self._check_saved(trainer)

    def on_validation_start(self, trainer, pl_module):
        self._eval_batches = 0
        if self._saving:
            self._check_saved(trainer)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if self.phase is None:
            return
        self._eval_batches += 1
        self.phase.eval_progress(self._eval_batches, _validation_batches(trainer))
        self.phase.busy("validating")  # and the epoch-end metrics after: work until the next step

    def on_validation_end(self, trainer, pl_module):
        self._eval_batches = 0
        if self.phase is not None:
            self.phase.eval_end()

    def on_save_checkpoint(self, trainer, pl_module, checkpoint):
        # Called before the file is written: the next hook measures it, and
        # the write is work until the next step.
        self._saving = True
        if self.phase is not None:
            self.phase.busy("saving")

    def on_train_end(self, trainer, pl_module):
        if self.phase is not None:
            if self._saving:
                self._check_saved(trainer)
            self.phase.progress(trainer.global_step, self._total)
            self.phase.end()

    def on_exception(self, trainer, pl_module, exception):
        # Lightning calls this for trainer.validate/test/predict too: an
        # exception there, after the fit ended ok, is not the fit's failure.
        if self.phase is not None and _fitting(trainer):
            if type(exception).__name__ == "SIGTERMException" or getattr(trainer, "received_sigterm", False):
                self.phase.fail("SIGTERM")
            else:
                self.phase.fail(exception)

    def teardown(self, trainer, pl_module, stage=None):
        if self.phase is not None and self.phase.running:
            self.phase.end()

    def _check_saved(self, trainer):
        self._saving = False
        for cb in getattr(trainer, "checkpoint_callbacks", None) or []:
            path = getattr(cb, "_last_checkpoint_saved", None) or getattr(cb, "last_model_path", None)
            if path and self._seen_checkpoints.get(id(cb)) != path:
                self._seen_checkpoints[id(cb)] = path
                self.phase.saved(path)


def _fitting(trainer):
    """Whether the trainer is in fit (trainer.state.fn), True when it does
    not say."""
    fn = getattr(getattr(trainer, "state", None), "fn", None)
    return fn is None or str(getattr(fn, "value", fn)) == "fit"


def _checkpoint_dirs(trainer):
    """Where the trainer's checkpoint callbacks write: watched dirs of the
    phase, whatever filesystem they are on."""
    out = []
    for cb in getattr(trainer, "checkpoint_callbacks", None) or []:
        d = getattr(cb, "dirpath", None)
        if d:
            out.append(d)
    return out


def _stepping_batches(trainer):
    try:
        total = trainer.estimated_stepping_batches
    except Exception:  # no dataloader length yet, or a framework that has none
        return None
    try:
        if math.isinf(float(total)):
            return None
    except (TypeError, ValueError):
        return None
    return _wire.count(total, 1)


def _validation_batches(trainer):
    batches = getattr(trainer, "num_sanity_val_batches" if getattr(trainer, "sanity_checking", False)
                      else "num_val_batches", None)
    if isinstance(batches, (list, tuple)):
        try:
            batches = sum(batches)
        except TypeError:
            return None
    try:
        if batches is None or math.isinf(float(batches)):
            return None
    except (TypeError, ValueError):
        return None
    return _wire.count(batches, 1)


def _loss(trainer, outputs):
    metrics = getattr(trainer, "callback_metrics", None) or {}
    for key in LOSS_KEYS:
        if key in metrics:
            return metrics[key]
    if isinstance(outputs, dict):
        return outputs.get("loss")
    if hasattr(outputs, "detach"):
        return outputs
    return None


def _base():
    for name in ("lightning.pytorch", "pytorch_lightning"):
        mod = sys.modules.get(name)
        if mod is not None and hasattr(mod, "Callback"):
            return mod.Callback
    try:
        from lightning.pytorch import Callback
    except ImportError:
        from pytorch_lightning import Callback
    return Callback


_classes = {}


def __getattr__(name):
    if name == "Callback":
        cls = _classes.get(name)
        if cls is None:
            cls = _classes[name] = type("Callback", (Hooks, _base()), {
                "__module__": __name__,
                "__doc__": "A Lightning Callback that reports the phase to lavender.\n\n" + Hooks.__doc__,
            })
        return cls
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
