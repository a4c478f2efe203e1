"""Hugging Face transformers (and TRL's SFTTrainer, DPOTrainer, which
subclass Trainer): lavender.hf.Callback.

    trainer = Trainer(..., callbacks=[lavender.hf.Callback("Finetune")])
    trainer.train()

transformers is imported when Callback is first used, not before.
"""

import math
import os
import sys

from . import _phase, _wire

# Trainer saves checkpoints as output_dir/checkpoint-<global step>.
CHECKPOINT_PREFIX = "checkpoint"


class Hooks:
    """The callback's behaviour, apart from transformers' TrainerCallback
    base so this module imports without it.

    on_init_end      arms the phase: from here an uncaught exception or a
                     SIGTERM ends it failed, even before training starts
                     (accelerate's prepare, a resume_from_checkpoint with
                     no checkpoint there); Trainer(...)'s own errors come
                     before any callback.
    on_train_begin   starts it, at global_step/max_steps (0 on a fresh run).
    on_step_begin    ends the work between steps (see on_step_end).
    on_step_end      records global_step and max_steps; an evaluation or a
                     save to follow is work (busy) until the next step.
    on_epoch_end     the same for an evaluation or a save at the end of an
                     epoch (the "epoch" strategies).
    training_step    (wrapped on the trainer for the run) records the loss
                     Trainer backpropagates, NaN included: the model's, a
                     custom compute_loss's, TRL's.
    on_log           records the logged loss (when no step loss was seen:
                     Trainer's logging_nan_inf_filter hides NaN), and any
                     non-finite value logged beside it (TRL's rewards/*,
                     logits/*) as a diverged loss.
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
        self._step_loss = False
        self._trainer = None

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
        self._watch_step_loss(_calling_trainer(self))
        if not self._step_loss:
            self._watch_model_loss(model)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.phase is not None:
            self.phase.idle()

    def on_step_end(self, args, state, control, **kwargs):
        if self.phase is None:
            return
        self.phase.progress(state.global_step, state.max_steps)
        self._busy_with(control)

    def on_epoch_end(self, args, state, control, **kwargs):
        # With save_strategy or evaluation_strategy "epoch", what follows the
        # epoch's last step is decided here, not in on_step_end.
        if self.phase is not None:
            self._busy_with(control)

    def _busy_with(self, control):
        # DefaultFlowCallback, first in Trainer's list of callbacks, has
        # decided what follows: an evaluation (with compute_metrics and the
        # on_evaluate callbacks) and a save (with its hub push) are work, not
        # a stall.
        if getattr(control, "should_evaluate", False):
            self.phase.busy("evaluating")
        elif getattr(control, "should_save", False):
            self.phase.busy("saving")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.phase is None or not logs or "loss" not in logs:
            return  # an evaluation's logs (eval_loss) are not the training loss
        if not self._model_loss and not self._step_loss:
            self.phase.loss(logs["loss"])
        # logging_nan_inf_filter keeps the logged loss finite (0.0 when every
        # step was NaN), while TRL logs rewards/chosen, logits/chosen, ...
        # beside it: any of them not finite is a diverged run.
        for key, value in logs.items():
            if isinstance(value, float) and not math.isfinite(value):
                self.phase.diverged(value, key)
                break

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
        self.phase.busy("evaluating")

    def on_evaluate(self, args, state, control, **kwargs):
        self._eval_batches = 0
        if self.phase is not None:
            self.phase.eval_end()
            # Callbacks after ours (their on_evaluate) and the save that may
            # follow are still work between steps.
            self.phase.busy("saving" if getattr(control, "should_save", False) else "evaluating")

    on_predict = on_evaluate

    def on_save(self, args, state, control, **kwargs):
        if self.phase is None or not getattr(args, "output_dir", None):
            return
        path = os.path.join(args.output_dir, "%s-%d" % (CHECKPOINT_PREFIX, state.global_step))
        if os.path.exists(path):
            self.phase.saved(path)

    def on_train_end(self, args, state, control, **kwargs):
        self._unwatch_model_loss()
        self._unwatch_step_loss()
        if self.phase is not None:
            self.phase.progress(state.global_step, state.max_steps)
            self.phase.end()

    def failed(self, exc):
        """Ends the phase failed, for a caller that catches train()'s
        exception itself (an uncaught one ends it on its own)."""
        self._unwatch_model_loss()
        self._unwatch_step_loss()
        if self.phase is not None:
            self.phase.fail(exc)

    # The loss training_step returns is the one Trainer backpropagates,
    # whoever computed it: the model, a custom compute_loss, TRL's DPO. It
    # is read from the trainer's own training_step, wrapped on the instance
    # for the run; the forward hook below is for a trainer not found.
    def _watch_step_loss(self, trainer):
        self._unwatch_step_loss()
        step = getattr(trainer, "training_step", None)
        if step is None:
            return
        hooks = self

        def training_step(*args, **kwargs):
            loss = step(*args, **kwargs)
            try:
                if hooks.phase is not None:
                    hooks.phase.loss(loss)
            except Exception:  # never break a training step
                pass
            return loss

        try:
            trainer.training_step = training_step
        except Exception:
            return
        self._trainer, self._step_loss = trainer, True

    def _unwatch_step_loss(self):
        trainer, self._trainer, self._step_loss = self._trainer, None, False
        if trainer is not None and "training_step" in vars(trainer):
            try:
                del trainer.training_step
            except Exception:
                pass

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
            if loss is not None and not self._step_loss:
                self._model_loss = True
                self.phase.loss(loss)
        except Exception:  # never break a forward pass
            pass


def _calling_trainer(callback):
    """The Trainer whose callback handler called callback's hook: Trainer
    hands its callbacks no reference to itself, so the calling frames are
    looked up for it (a few, cheaply, once per train())."""
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        obj = frame.f_locals.get("self")
        handler = getattr(obj, "callback_handler", None)
        if handler is not None and callback in getattr(handler, "callbacks", ()):
            return obj
        frame = frame.f_back
    return None


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
