"""A stand-in for Hugging Face transformers: a Trainer that calls a
TrainerCallback's hooks where transformers' Trainer does.

Trainer.__init__ ends with on_init_end. train() checks its arguments and
prepares (a failure here comes before any training hook, as accelerate's
prepare and a bad max_steps do), then on_train_begin; per epoch
on_epoch_begin; per step on_step_begin, the forward pass (a model's forward
hooks run), on_step_end; every logging_steps on_log with the loss averaged
since the last log, NaN and Inf steps left out while logging_nan_inf_filter
is on (a NaN first step logs 0.0); every eval_steps an evaluation (per batch
on_prediction_step, eval_seconds in all, then on_evaluate and on_log); every
save_steps a checkpoint written to output_dir/checkpoint-N, then on_save;
on_epoch_end; on_train_end. Like the real one it calls no hook when training
raises. The model is a PreTrainedModel (its forward returns an output with
.loss) or a plain callable taking the step about to run.

Knobs for tests, as TrainingArguments fields: prepare_error (raised in
train() before on_train_begin), step_seconds (each step's sleep)."""

import math
import os
import time


class TrainingArguments:
    def __init__(self, output_dir="trainer_output", num_train_epochs=1, max_steps=-1, eval_steps=None, save_steps=None,
                 logging_steps=10, logging_nan_inf_filter=True, eval_batches=4, eval_seconds=0.0, step_seconds=0.0,
                 prepare_error=None, **kwargs):
        self.output_dir, self.num_train_epochs, self.max_steps = output_dir, num_train_epochs, max_steps
        self.eval_steps, self.save_steps, self.logging_steps = eval_steps, save_steps, logging_steps
        self.logging_nan_inf_filter, self.eval_batches, self.eval_seconds = logging_nan_inf_filter, eval_batches, eval_seconds
        self.step_seconds, self.prepare_error = step_seconds, prepare_error

    @property
    def process_index(self):
        return int(os.environ.get("RANK", "0"))


class TrainerState:
    def __init__(self):
        self.global_step, self.max_steps, self.epoch = 0, 0, 0.0
        self.log_history = []
        self.is_world_process_zero = int(os.environ.get("RANK", "0")) == 0
        self.is_local_process_zero = int(os.environ.get("LOCAL_RANK", "0")) == 0


class TrainerControl:
    should_training_stop = False


class TrainerCallback:
    def on_init_end(self, args, state, control, **kwargs): pass
    def on_train_begin(self, args, state, control, **kwargs): pass
    def on_train_end(self, args, state, control, **kwargs): pass
    def on_epoch_begin(self, args, state, control, **kwargs): pass
    def on_epoch_end(self, args, state, control, **kwargs): pass
    def on_step_begin(self, args, state, control, **kwargs): pass
    def on_substep_end(self, args, state, control, **kwargs): pass
    def on_pre_optimizer_step(self, args, state, control, **kwargs): pass
    def on_optimizer_step(self, args, state, control, **kwargs): pass
    def on_step_end(self, args, state, control, **kwargs): pass
    def on_evaluate(self, args, state, control, **kwargs): pass
    def on_predict(self, args, state, control, metrics, **kwargs): pass
    def on_save(self, args, state, control, **kwargs): pass
    def on_log(self, args, state, control, **kwargs): pass
    def on_prediction_step(self, args, state, control, **kwargs): pass


class ModelOutput(dict):
    def __getattr__(self, name):
        return self.get(name)


class PreTrainedModel:
    """A module with forward hooks, as torch.nn.Module calls them."""

    training = True

    def __init__(self):
        self._hooks = {}

    def register_forward_hook(self, hook):
        key = object()
        self._hooks[key] = hook
        model = self

        class Handle:
            def remove(self):
                model._hooks.pop(key, None)

        return Handle()

    def __call__(self, batch):
        out = self.forward(batch)
        for hook in list(self._hooks.values()):
            hook(self, (batch,), out)
        return out

    def forward(self, batch):
        return ModelOutput(loss=1.0)


class Trainer:
    def __init__(self, model=None, args=None, train_dataset=None, eval_dataset=None, callbacks=None, **kwargs):
        self.model, self.args = model, args or TrainingArguments()
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.callbacks = [cb() if isinstance(cb, type) else cb for cb in (callbacks or [])]
        self.state, self.control = TrainerState(), TrainerControl()
        self._call("on_init_end")

    def add_callback(self, callback):
        self.callbacks.append(callback)

    def _call(self, hook, **kwargs):
        for cb in self.callbacks:
            getattr(cb, hook)(self.args, self.state, self.control, model=self.model, **kwargs)

    def _step_loss(self, step):
        if isinstance(self.model, PreTrainedModel):
            return float(self.model(step).loss)
        out = self.model(step)
        return float(out) if isinstance(out, (int, float)) else 1.0

    def train(self):
        args = self.args
        if args.max_steps <= 0 and not hasattr(self.train_dataset, "__len__"):
            raise ValueError("args.max_steps must be set to a positive value if dataloader does not have a length, was %d"
                             % args.max_steps)
        if args.prepare_error:
            raise RuntimeError(args.prepare_error)
        per_epoch = len(self.train_dataset)
        epochs = args.num_train_epochs
        self.state.max_steps = args.max_steps if args.max_steps > 0 else epochs * per_epoch
        self._call("on_train_begin")
        tr_loss, last_logged = 0.0, 0
        for epoch in range(epochs):
            self._call("on_epoch_begin")
            for _ in range(per_epoch):
                if self.state.global_step >= self.state.max_steps:
                    break
                self._call("on_step_begin")
                loss = self._step_loss(self.state.global_step)
                if args.step_seconds:
                    time.sleep(args.step_seconds)
                steps_since = 1 + self.state.global_step - last_logged
                if args.logging_nan_inf_filter and (math.isnan(loss) or math.isinf(loss)):
                    tr_loss += tr_loss / steps_since
                else:
                    tr_loss += loss
                self.state.global_step += 1
                self.state.epoch = self.state.global_step / per_epoch
                self._call("on_step_end")
                if args.logging_steps and self.state.global_step % args.logging_steps == 0:
                    logs = {"loss": round(tr_loss / (self.state.global_step - last_logged), 4), "learning_rate": 5e-5}
                    tr_loss, last_logged = 0.0, self.state.global_step
                    self.state.log_history.append(logs)
                    self._call("on_log", logs=logs)
                if args.eval_steps and self.state.global_step % args.eval_steps == 0:
                    self.evaluate()
                if args.save_steps and self.state.global_step % args.save_steps == 0:
                    self._save()
            self._call("on_epoch_end")
        self._call("on_train_end")
        return self.state

    def evaluate(self):
        loader = list(range(self.args.eval_batches))
        for _ in loader:
            time.sleep(self.args.eval_seconds / max(len(loader), 1))
            self._call("on_prediction_step", eval_dataloader=loader)
        metrics = {"eval_loss": 0.5}
        self._call("on_evaluate", metrics=metrics)
        self._call("on_log", logs=metrics)
        return metrics

    def _save(self):
        path = os.path.join(self.args.output_dir, "checkpoint-%d" % self.state.global_step)
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(b"\0" * 4096)
        self._call("on_save")
