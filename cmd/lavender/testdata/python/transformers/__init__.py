"""A stand-in for Hugging Face transformers: just enough Trainer to call a
TrainerCallback's hooks in the order transformers' Trainer does (on_init_end
in __init__; then on_train_begin, per epoch on_epoch_begin, per step
on_step_begin / on_step_end, on_evaluate every eval_steps, on_save,
on_epoch_end, and on_train_end). Like the real one, it calls no hook when
training raises. The model is a callable taking the step about to run."""


class TrainingArguments:
    def __init__(self, num_train_epochs=1, max_steps=-1, eval_steps=None):
        self.num_train_epochs, self.max_steps, self.eval_steps = num_train_epochs, max_steps, eval_steps


class TrainerState:
    def __init__(self):
        self.global_step, self.max_steps, self.epoch = 0, 0, 0.0
        self.is_world_process_zero, self.is_local_process_zero = True, True


class TrainerControl:
    should_training_stop = False


class TrainerCallback:
    def on_init_end(self, args, state, control, **kwargs): pass
    def on_train_begin(self, args, state, control, **kwargs): pass
    def on_epoch_begin(self, args, state, control, **kwargs): pass
    def on_step_begin(self, args, state, control, **kwargs): pass
    def on_step_end(self, args, state, control, **kwargs): pass
    def on_evaluate(self, args, state, control, **kwargs): pass
    def on_save(self, args, state, control, **kwargs): pass
    def on_epoch_end(self, args, state, control, **kwargs): pass
    def on_train_end(self, args, state, control, **kwargs): pass


class Trainer:
    def __init__(self, model=None, args=None, train_dataset=None, callbacks=None, **kwargs):
        self.model, self.args, self.train_dataset = model, args or TrainingArguments(), train_dataset
        self.callbacks = list(callbacks or [])
        self.state, self.control = TrainerState(), TrainerControl()
        self._call("on_init_end")

    def add_callback(self, callback):
        self.callbacks.append(callback)

    def _call(self, hook, **kwargs):
        for cb in self.callbacks:
            getattr(cb, hook)(self.args, self.state, self.control, model=self.model, **kwargs)

    def train(self):
        per_epoch = len(self.train_dataset)
        epochs = self.args.num_train_epochs
        self.state.max_steps = self.args.max_steps if self.args.max_steps > 0 else epochs * per_epoch
        self._call("on_train_begin")
        for epoch in range(epochs):
            self._call("on_epoch_begin")
            for _ in range(per_epoch):
                if self.state.global_step >= self.state.max_steps:
                    break
                self._call("on_step_begin")
                self.model(self.state.global_step)
                self.state.global_step += 1
                self.state.epoch = self.state.global_step / per_epoch
                self._call("on_step_end")
                if self.args.eval_steps and self.state.global_step % self.args.eval_steps == 0:
                    self._call("on_evaluate", metrics={})
                    self._call("on_save")
            self._call("on_epoch_end")
        self._call("on_train_end")
        return self.state
