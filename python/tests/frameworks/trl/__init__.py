"""A stand-in for TRL: SFTTrainer and DPOTrainer subclass transformers'
Trainer and take the same callbacks, as the real ones do."""

from transformers import Trainer


class SFTTrainer(Trainer):
    pass


class DPOTrainer(Trainer):
    def __init__(self, model=None, ref_model=None, **kwargs):
        super().__init__(model=model, **kwargs)
