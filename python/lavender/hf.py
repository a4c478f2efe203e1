"""Hugging Face transformers (and TRL's SFTTrainer, DPOTrainer, which
subclass Trainer): lavender.hf.Callback.

    trainer = Trainer(..., callbacks=[lavender.hf.Callback("Finetune")])
    trainer.train()

transformers is imported when Callback is first used, not before.
"""

import os

from . import _phase, _wire

# Trainer saves checkpoints as output_dir/checkpoint-<global step>.
CHECKPOINT_PREFIX = "checkpoint"


class Hooks:
    """The callback's behaviour, apart from transformers' TrainerCallback
    base so this module imports without it.

    on_init_end      arms the phase: from here an uncaught exception or a
                     SIGTERM ends it failed, even before training starts
                     (accelerate's prepare, a bad max_steps).
    on_train_begin   starts it, at global_step/max_steps (0 on a fresh run).
    on_step_end      records global_step and max_steps.
    on_log           records the logged loss (when the model's own loss was
                     not seen: Trainer's logging_nan_inf_filter hides NaN).
    on_prediction_step, on_evaluate
                     record evaluation batches, so a long evaluation is
                     movement and a hung one a stall.
    on_save          measures the checkpoint just written, off the training
                     thread.
    on_train_end     ends the phase ok.
    """

    def __init__(self, name, every=60):
        self.name, self.every = name, every
        self.phase = None
        self._eval_batches = 0
        self._forward_hook = None
        self._model_loss = False

    def _phase_for(self, args):
        if self.phase is None or self.phase.ended:
            rank = _wire.count(getattr(args, "process_index", None))
            self.phase = _phase.Phase(self.name, every=self.every, dirs=[getattr(args, "output_dir", None)], rank=rank)
        return self.phase

    def on_init_end(self, args, state, control, **kwargs):
        self._phase_for(args).arm()

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        p = self._phase_for(args)
        p.progress(state.global_step, state.max_steps)
        p.start()
        self._watch_model_loss(model)

    def on_step_end(self, args, state, control, **kwargs):
        if self.phase is not None:
            self.phase.progress(state.global_step, state.max_steps)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.phase is not None and logs and not self._model_loss and "loss" in logs:
            self.phase.loss(logs["loss"])

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if self.phase is None:
            return
        self._eval_batches += 1
        total = None
        try:
            total = len(eval_dataloader) if eval_dataloader is not None else None
        except TypeError:  # an iterable dataset has no length
            pass
        self.phase.eval_progress(self._eval_batches, total)

    def on_evaluate(self, args, state, control, **kwargs):
        self._eval_batches = 0
        if self.phase is not None:
            self.phase.eval_end()

    on_predict = on_evaluate

    def on_save(self, args, state, control, **kwargs):
        if self.phase is None or not getattr(args, "output_dir", None):
            return
        path = os.path.join(args.output_dir, "%s-%d" % (CHECKPOINT_PREFIX, state.global_step))
        if os.path.exists(path):
            self.phase.saved(path)

    def on_train_end(self, args, state, control, **kwargs):
        self._unwatch_model_loss()
        if self.phase is not None:
            self.phase.progress(state.global_step, state.max_steps)
            self.phase.end()

    def failed(self, exc):
        """Ends the phase failed, for a caller that catches train()'s
        exception itself (an uncaught one ends it on its own)."""
        self._unwatch_model_loss()
        if self.phase is not None:
            self.phase.fail(exc)

    # The model's own loss, read by a forward hook, is the loss of every
    # batch as computed, NaN included; the logged one is an average that
    # logging_nan_inf_filter cleans.
    def _watch_model_loss(self, model):
        self._unwatch_model_loss()
        register = getattr(model, "register_forward_hook", None)
        if register is None:
            return
        try:
            self._forward_hook = register(self._on_forward)
        except Exception:
            self._forward_hook = None

    def _unwatch_model_loss(self):
        handle, self._forward_hook = self._forward_hook, None
        if handle is not None:
            try:
                handle.remove()
            except Exception:
                pass

    def _on_forward(self, module, inputs, output):
        try:
            if not getattr(module, "training", True) or self.phase is None:
                return
            loss = getattr(output, "loss", None)
            if loss is None and isinstance(output, dict):
                loss = output.get("loss")
            if loss is not None:
                self._model_loss = True
                self.phase.loss(loss)
        except Exception:  # never break a forward pass
            pass


_classes = {}


def __getattr__(name):
    if name == "Callback":
        cls = _classes.get(name)
        if cls is None:
            from transformers import TrainerCallback

            cls = _classes[name] = type("Callback", (Hooks, TrainerCallback), {
                "__module__": __name__,
                "__doc__": "A transformers TrainerCallback that reports the phase to lavender.\n\n" + Hooks.__doc__,
            })
        return cls
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
