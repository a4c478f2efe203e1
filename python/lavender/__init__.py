"""lavender's Python client: tells a lavender exporter (or `lavender serve`)
how a training phase is going, from a plain loop, a Hugging Face Trainer or
a PyTorch Lightning Trainer, and never slows or breaks the training.

    import lavender

    with lavender.phase("Pretrain 1/3", every=60) as p:
        for step, batch in enumerate(loader, 1):
            loss = train_step(batch)
            p.progress(step, total, loss=loss)

lavender.hf.Callback and lavender.lightning.Callback do the same from the
frameworks' hooks; each imports its framework only when used.
"""

import importlib

from ._phase import Phase

__all__ = ["Phase", "phase", "hf", "lightning"]


def _version():
    # An installed package has the version its build wrote; a checkout run
    # in place (PYTHONPATH=python) reads the repository's VERSION, which
    # the Go binary embeds too.
    try:
        from ._version import version
        return version
    except ImportError:
        pass
    import os
    try:
        with open(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "VERSION"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return "0+unknown"


__version__ = _version()


def phase(name, every=60, total=None, dirs=()):
    """A phase for a `with` block: started on entry, ended on exit (failed,
    with the exception's line, if the block raises).

    every: seconds between pings. total: the steps of the whole phase, if
    known now (or pass it to progress()). dirs: directories the phase writes
    to besides the working directory (checkpoints), for the disk guard.
    """
    return Phase(name, every=every, total=total, dirs=dirs)


def __getattr__(name):
    # lavender.hf and lavender.lightning load on first use, so importing
    # lavender imports no framework.
    if name in ("hf", "lightning"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
