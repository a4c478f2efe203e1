"""A stand-in for PyTorch Lightning 2.x: a Trainer whose fit calls a
Callback's hooks in Lightning's order.

fit: setup("fit"); the module's configure_optimizers; Lightning's SIGTERM
handler, installed only where no handler is set yet (it raises SystemExit
without a code, so the process exits 0); on_fit_start; with validation
data, the sanity check (on_sanity_check_start, num_sanity_val_steps
validation batches, on_sanity_check_end); on_train_start; per epoch
on_train_epoch_start, per batch on_train_batch_start / training_step /
on_train_batch_end (what the module logs is in callback_metrics), then
validation (on_validation_start, per batch on_validation_batch_start /
on_validation_batch_end, on_validation_end) and a checkpoint
(on_save_checkpoint before the file is written, as ModelCheckpoint does),
on_train_epoch_end; on_train_end; on_fit_end; teardown("fit"). An exception
anywhere in fit calls on_exception and teardown; KeyboardInterrupt is then
swallowed and fit returns normally, anything else is raised again.
estimated_stepping_batches is max_epochs times the batches per epoch."""

import os
import signal


class Callback:
    def setup(self, trainer, pl_module, stage): pass
    def teardown(self, trainer, pl_module, stage): pass
    def on_fit_start(self, trainer, pl_module): pass
    def on_fit_end(self, trainer, pl_module): pass
    def on_sanity_check_start(self, trainer, pl_module): pass
    def on_sanity_check_end(self, trainer, pl_module): pass
    def on_train_start(self, trainer, pl_module): pass
    def on_train_end(self, trainer, pl_module): pass
    def on_train_epoch_start(self, trainer, pl_module): pass
    def on_train_epoch_end(self, trainer, pl_module): pass
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx): pass
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx): pass
    def on_validation_start(self, trainer, pl_module): pass
    def on_validation_end(self, trainer, pl_module): pass
    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0): pass
    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0): pass
    def on_save_checkpoint(self, trainer, pl_module, checkpoint): pass
    def on_exception(self, trainer, pl_module, exception): pass


class LightningModule:
    def __init__(self):
        self.trainer = None

    def log(self, name, value, **kwargs):
        self.trainer.callback_metrics[name] = value

    def configure_optimizers(self):
        return None


class ModelCheckpoint:
    def __init__(self):
        self._last_checkpoint_saved = ""
        self.last_model_path = ""


class Trainer:
    def __init__(self, max_epochs=1, callbacks=None, default_root_dir=None, num_sanity_val_steps=2,
                 enable_checkpointing=True, **kwargs):
        self.max_epochs, self.callbacks = max_epochs, list(callbacks or [])
        self.default_root_dir = default_root_dir or os.getcwd()
        self.num_sanity_val_steps = num_sanity_val_steps
        self.global_step, self.current_epoch = 0, 0
        self.global_rank = int(os.environ.get("RANK", "0"))
        self.is_global_zero = self.global_rank == 0
        self.estimated_stepping_batches = float("inf")
        self.callback_metrics = {}
        self.sanity_checking = False
        self.num_sanity_val_batches, self.num_val_batches = [], []
        self.received_sigterm = False
        self.checkpoint_callbacks = [ModelCheckpoint()] if enable_checkpointing else []
        self.checkpoint_callback = self.checkpoint_callbacks[0] if self.checkpoint_callbacks else None

    def _call(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def _sigterm(self, signum, frame):
        self.received_sigterm = True
        raise SystemExit()

    def _validate(self, model, loader, limit):
        batches = list(loader)[:limit]
        self._call("on_validation_start", model)
        for i, batch in enumerate(batches):
            self._call("on_validation_batch_start", model, batch, i, 0)
            out = model.validation_step(batch, i) if hasattr(model, "validation_step") else None
            self._call("on_validation_batch_end", model, out, batch, i, 0)
        self._call("on_validation_end", model)

    def fit(self, model, train_dataloaders=None, val_dataloaders=None):
        loader = train_dataloaders
        if hasattr(model, "trainer"):
            model.trainer = self
        self.estimated_stepping_batches = self.max_epochs * len(loader)
        try:
            self._call("setup", model, "fit")
            if hasattr(model, "configure_optimizers"):
                model.configure_optimizers()
            if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
                signal.signal(signal.SIGTERM, self._sigterm)
            self._call("on_fit_start", model)
            if val_dataloaders is not None and self.num_sanity_val_steps:
                self.sanity_checking = True
                self.num_sanity_val_batches = [min(self.num_sanity_val_steps, len(val_dataloaders))]
                self._call("on_sanity_check_start", model)
                self._validate(model, val_dataloaders, self.num_sanity_val_steps)
                self._call("on_sanity_check_end", model)
                self.sanity_checking = False
            self._call("on_train_start", model)
            for epoch in range(self.max_epochs):
                self.current_epoch = epoch
                self._call("on_train_epoch_start", model)
                for i, batch in enumerate(loader):
                    self._call("on_train_batch_start", model, batch, i)
                    out = model.training_step(batch, i)
                    self.global_step += 1
                    self._call("on_train_batch_end", model, out, batch, i)
                if val_dataloaders is not None:
                    self.num_val_batches = [len(val_dataloaders)]
                    self._validate(model, val_dataloaders, len(val_dataloaders))
                for ckpt in self.checkpoint_callbacks:
                    self._call("on_save_checkpoint", model, {})
                    path = os.path.join(self.default_root_dir, "checkpoints", "epoch=%d.ckpt" % epoch)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "wb") as f:
                        f.write(b"\0" * 2048)
                    ckpt._last_checkpoint_saved = ckpt.last_model_path = path
                self._call("on_train_epoch_end", model)
            self._call("on_train_end", model)
            self._call("on_fit_end", model)
            self._call("teardown", model, "fit")
        except KeyboardInterrupt as e:
            self._call("on_exception", model, e)
            self._call("teardown", model, "fit")
        except BaseException as e:
            self._call("on_exception", model, e)
            self._call("teardown", model, "fit")
            raise
