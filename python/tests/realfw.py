"""The real frameworks (transformers, accelerate, TRL, Lightning) for the
tests that need them: $LAVENDER_FRAMEWORKS names the directory holding
them (the tarball in ../shared/frameworks/, extracted by python/ fw_test.go),
used over the interpreter's own torch. Without it those tests skip, saying
why; under LAVENDER_E2E=1 they fail instead."""

import os
import sys
import unittest

from .servers import run_child


def frameworks():
    """The frameworks' directory, first on sys.path; raises SkipTest (or,
    under LAVENDER_E2E=1, RuntimeError) when it is not there."""
    d = os.environ.get("LAVENDER_FRAMEWORKS", "")
    why = None
    if not d:
        why = "LAVENDER_FRAMEWORKS is not set (go test ./python sets it from ../shared/frameworks/fw.tgz)"
    elif not os.path.isdir(os.path.join(d, "lightning")):
        why = "LAVENDER_FRAMEWORKS=%s holds no lightning package" % d
    else:
        try:
            import torch  # noqa: F401
        except ImportError as e:
            why = "%s cannot import torch (%s): install the Debian package python3-torch" % (sys.executable, e)
    if why:
        if os.environ.get("LAVENDER_E2E") == "1":
            raise RuntimeError(why)
        raise unittest.SkipTest(why)
    if d not in sys.path:
        sys.path.insert(0, d)
    return d


def run(code, env=None, timeout=120, cwd=None):
    """Runs code in a fresh interpreter with the client and the real
    frameworks on its path; returns the CompletedProcess."""
    return run_child(code, frameworks(), env, timeout, cwd)
