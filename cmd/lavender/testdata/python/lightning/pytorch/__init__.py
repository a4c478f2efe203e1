"""A stand-in for PyTorch Lightning: a Trainer whose fit calls a Callback's
hooks in Lightning's order (on_fit_start, on_train_start, per epoch
on_train_epoch_start, per batch on_train_batch_start / on_train_batch_end,
on_train_epoch_end, then on_train_end, on_fit_end) and on_exception when
training raises. estimated_stepping_batches is max_epochs times the batches
per epoch, as Lightning computes it without accumulation."""


class Callback:
    def on_fit_start(self, trainer, pl_module): pass
    def on_train_start(self, trainer, pl_module): pass
    def on_train_epoch_start(self, trainer, pl_module): pass
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx): pass
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx): pass
    def on_train_epoch_end(self, trainer, pl_module): pass
    def on_train_end(self, trainer, pl_module): pass
    def on_fit_end(self, trainer, pl_module): pass
    def on_exception(self, trainer, pl_module, exception): pass


class Trainer:
    def __init__(self, max_epochs=1, callbacks=None, **kwargs):
        self.max_epochs, self.callbacks = max_epochs, list(callbacks or [])
        self.global_step, self.current_epoch, self.is_global_zero = 0, 0, True
        self.estimated_stepping_batches = float("inf")

    def _call(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def fit(self, model, train_dataloaders=None):
        loader = train_dataloaders
        self.estimated_stepping_batches = self.max_epochs * len(loader)
        try:
            self._call("on_fit_start", model)
            self._call("on_train_start", model)
            for epoch in range(self.max_epochs):
                self.current_epoch = epoch
                self._call("on_train_epoch_start", model)
                for i, batch in enumerate(loader):
                    self._call("on_train_batch_start", model, batch, i)
                    out = model.training_step(batch, i)
                    self.global_step += 1
                    self._call("on_train_batch_end", model, out, batch, i)
                self._call("on_train_epoch_end", model)
            self._call("on_train_end", model)
            self._call("on_fit_end", model)
        except BaseException as e:
            self._call("on_exception", model, e)
            raise
