"""A training phase as the exporter sees it: started, pinged with the loop's
progress, ended ok or failed with a reason."""

import atexit
import collections
import logging
import math
import os
import signal
import sys
import threading
import time

from . import _sender, _wire


OK, FAILED = "ok", "failed"
# How long an end waits for the size of a checkpoint saved just before it.
SIZE_WAIT = 1.0
# How long a save's size waits for the save before it to be booked first.
ORDER_WAIT = 60.0


class Phase:
    """One phase. phase() makes one for a `with` block; the framework
    callbacks make one and drive it from their hooks.

    progress() and eval_progress() only store what they are given: the
    sender thread reads it every `every` seconds and posts it, so the
    training loop never waits on the network and may call them every step.
    """

    def __init__(self, name, every=60, total=None, dirs=(), rank=None, url=None, env=None):
        env = os.environ if env is None else env
        try:
            every = float(every)
        except (TypeError, ValueError):
            raise ValueError("lavender: every must be a number of seconds, not %r" % (every,)) from None
        if not every > 0 or math.isinf(every):
            raise ValueError("lavender: every must be more than 0 seconds, not %r" % (every,))
        # Under `lavender phase run` the wrapper owns the phase: report into it.
        self.wrapped = env.get("LAVENDER_PHASE", "").strip()
        given = self.wrapped or str(name)
        # A name the heartbeat API refuses would lose every heartbeat of the
        # phase, its failure included: it goes as one the API takes.
        self.name, why = _wire.phase_name(given)
        if why:
            _said.once(("name", given), "lavender: phase name %s %s; it is reported as %r (said once)"
                       % (ascii(given) if not given.isprintable() else repr(given), why, self.name))
        self.every = every
        given = _wire.env_rank(env) if rank is None else rank
        # Without a launcher's rank the process group's is looked up at the
        # start and the end, where the program has usually set it up.
        self._rank_known = given is not None
        self.rank = 0 if given is None else given
        self._sender = None
        try:
            base = _wire.normalize_url(env.get("LAVENDER_URL") if url is None else url)
            self._sender = _sender.sender_for(base)
        except ValueError as e:
            _sender.say(logging.WARNING, "lavender: %s; phase %r is not reported (training goes on)" % (e, self.name))
        # Reentrant: the SIGTERM handler ends phases from the main thread,
        # which may hold the lock at that moment.
        self._lock = threading.RLock()
        self._progress = (None, total, None)  # step, total, loss, replaced whole
        self._eval = None  # (eval_step, eval_total) while an evaluation runs
        # Saves measured and not yet posted, oldest first, each as (bytes,
        # the watched dir it went to): one ping carries one, so two saves
        # measured between two pings are both booked.
        self._saves = collections.deque(maxlen=_wire.MAX_SAVES)
        self._saves_taken = threading.Condition(self._lock)
        self._sizers = []
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        self._dirs = self._fitting_dirs([cwd] + list(dirs))
        self._state = "new"  # armed (hooks set, nothing sent), running, ended
        self._pid = os.getpid()
        self._sigterm = False
        self._kicked = False
        self._next_ping = math.inf
        self._ended_ok = False  # ended ok while running: a later failure still fails it
        self._diverged = None  # a non-finite value the framework logged
        self._busy = None  # (what, thread ident, native id) while busy between steps
        self._busy_seen = None  # what the last ping saw of the busy thread
        # A phase counts steps from 0 at its start, so a hang before the
        # first step (a data loader's first batch) stalls even without a
        # total; a caller that resumes at a step not known yet says False.
        self.steps_from_zero = True

    # ---- what the training code calls ----

    def progress(self, step, total=None, loss=None):
        """Records the steps done so far, the total if known, and the latest
        loss (a float or a tensor: a tensor is detached here and read by the
        sender, so this never waits on the GPU)."""
        if loss is not None and hasattr(loss, "detach"):
            try:
                loss = loss.detach()
            except Exception:
                loss = None
        if total is None:
            total = self._progress[1]
        if loss is None:
            loss = self._progress[2]
        self._progress = (step, total, loss)
        self._busy = None
        if not self._kicked and self._state == "running":
            # The first step is news (step 0 at the start of training): send
            # it now, as it is, not a minute later.
            self._kicked = True
            if self._sender is not None and self.rank == 0:
                body = {"phase": self.name, "event": "ping"}
                self._add_progress(body, with_loss=isinstance(self._progress[2], (int, float)))
                self._sender.post(body)

    def loss(self, loss):
        """Records the latest loss alone."""
        step, total, _ = self._progress
        if loss is not None and hasattr(loss, "detach"):
            try:
                loss = loss.detach()
            except Exception:
                return
        self._progress = (step, total, loss)

    def diverged(self, value, what="loss"):
        """Records a non-finite value the framework logged (a NaN reward, a
        loss its NaN filter hid): the phase's loss reads it from now on, as
        a diverged run stays diverged."""
        self._diverged = value

    def eval_progress(self, step, total=None):
        """Records how far an evaluation has come (batches done, of total):
        a moving eval step keeps a long evaluation from looking stalled."""
        self._eval = (step, total)

    def eval_end(self):
        self._eval = None

    def busy(self, what):
        """Says the training thread (the caller) is doing `what` between two
        steps: evaluating, computing metrics, saving, pushing to the hub.
        While it runs, each ping whose look at that thread finds it moving
        (its Python stack changed, or it spent CPU time) carries busy, which
        counts as progress; a thread stuck in one place (a hung collective,
        a lock, a dead socket) sends none, and stalls. The next step ends
        it."""
        if self._busy is None or self._busy[0] != what:
            self._busy = (what, threading.get_ident(), getattr(threading.current_thread(), "native_id", None))

    def idle(self):
        self._busy = None

    def saved(self, path):
        """Reports the size of a checkpoint just written to path (a file or a
        directory), measured on a thread of its own."""
        if self._state != "running" or self.rank != 0 or self._sender is None:
            return
        before = self._sizers[-1] if self._sizers else None
        t = threading.Thread(target=self._measure, args=(path, before), name="lavender-size", daemon=True)
        self._sizers = [s for s in self._sizers if s.is_alive()] + [t]
        t.start()

    def add_dirs(self, *dirs):
        """Adds directories the phase writes to (checkpoints, logs)."""
        self._dirs = self._fitting_dirs(self._dirs + [d for d in dirs if d])

    def _fitting_dirs(self, dirs):
        left_out = []
        out = _wire.absolute_dirs(dirs, left_out)
        for d, problem in left_out:
            _said.once(("dir", d), "lavender: directory %s %s, which the heartbeat API refuses; phase %r is "
                       "reported without it (said once)" % (_shown_path(d), problem, self.name))
        return out

    def fail(self, reason):
        """Ends the phase failed; reason is an exception or a line of text."""
        if isinstance(reason, BaseException):
            reason = self._reason(reason)
        self._end(FAILED, _wire.short(reason) if reason else None)

    def end(self, ok=True, reason=None):
        """Ends the phase: ok, or failed with reason."""
        if ok and self._sigterm:
            ok, reason = False, "SIGTERM"
        self._end(OK if ok else FAILED, _wire.short(reason) if reason else None)

    @property
    def running(self):
        return self._state == "running"

    @property
    def ended(self):
        return self._state == "ended"

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or (isinstance(exc, SystemExit) and exc.code in (None, 0) and not self._sigterm):
            self.end()
        else:
            self.fail(exc)
        return False

    # ---- lifecycle ----

    def arm(self, sigterm=True):
        """Watches for failures (an uncaught exception, SIGTERM, an exit
        before the end) without starting the phase: a failure before
        training starts still ends it failed."""
        with self._lock:
            if self._state != "new":
                return
            self._state = "armed"
        _hooks.add(self)
        if sigterm:
            _hooks.catch_sigterm()

    def start(self):
        self.arm()
        with self._lock:
            if self._state != "armed":
                return
            self._state = "running"
            step, total, loss = self._progress
            if step is None and self.steps_from_zero:
                self._progress = (0, total, loss)
        self._learn_rank()
        if self._sender is None or self.rank != 0:
            return  # other ranks only ever report a failure
        if not self.wrapped:
            body = {"phase": self.name, "event": "start"}
            body.update(_wire.identity())
            if self._dirs:
                body["dirs"] = self._dirs
            self._add_progress(body, step_zero=True)
            self._sender.post(body)
        self._next_ping = time.monotonic() + self.every
        if self.wrapped:
            self._next_ping = 0  # the wrapper's phase learns dirs and progress now
        self._sender.watch(self)

    def _end(self, status, reason):
        self._learn_rank()
        with self._lock:
            if self._state == "ended":
                # Once ended ok, the phase can still fail: a callback after
                # ours raising in on_train_end, a save or a hub push after
                # train() returned. That end is news; any other is not.
                if status != FAILED or not self._ended_ok:
                    return
                self._ended_ok = False
                self._end_failed_after_ok(reason)
                return
            was, self._state = self._state, "ended"
            self._ended_ok = status == OK and was == "running"
        _hooks.remove(self)
        if self._ended_ok:
            _hooks.ended_ok(self)
        if os.getpid() != self._pid or self._sender is None:
            return  # a forked child (a DataLoader worker) reports nothing
        wait = _sender.END_WAIT
        if self.rank == 0 and was == "running":
            wait = self._hand_over_saves()
        self._sender.unwatch(self)
        if status == OK and (was != "running" or self.rank != 0 or self.wrapped):
            if self.wrapped and was == "running" and self.rank == 0:
                self._sender.post(self._ping_body(), wait=wait)  # the last step
            return
        if self.rank != 0:
            reason = "rank %d: %s" % (self.rank, reason or "failed")
        body = {"phase": self.name, "event": "end", "status": status}
        if reason:
            body["reason"] = _wire.short(reason)
        if self.rank == 0:
            self._add_progress(body)
        self._sender.post(body, wait=wait)

    def _learn_rank(self):
        if not self._rank_known:
            rank = _wire.torch_rank()
            if rank is not None:
                self.rank = rank

    def _hand_over_saves(self):
        """Sees the saves measured and not yet pinged onto the wire before
        the end: a save just before it (the last checkpoint) is still news
        to the disk guard, so its size is waited for a moment. The sender
        pings them, one each, in order; what it has not taken in time (a
        server that does not answer) is queued behind them. The saves and
        the end share one END_WAIT: this returns what is left of it."""
        sized = time.monotonic() + SIZE_WAIT
        for t in self._sizers:
            t.join(max(sized - time.monotonic(), 0))
        deadline = time.monotonic() + _sender.END_WAIT
        if self._saves:
            self._ping_soon()
            with self._saves_taken:
                self._saves_taken.wait_for(lambda: not self._saves, _sender.END_WAIT)
            while self._saves:
                self._sender.post(self._ping_body())
        return max(deadline - time.monotonic(), 0)

    def _end_failed_after_ok(self, reason):
        _hooks.forget_ended_ok(self)
        if os.getpid() != self._pid or self._sender is None:
            return
        if self.rank != 0:
            reason = "rank %d: %s" % (self.rank, reason or "failed")
        body = {"phase": self.name, "event": "end", "status": FAILED}
        if reason:
            body["reason"] = _wire.short(reason)
        self._sender.post(body, wait=_sender.END_WAIT)

    def _reason(self, exc):
        if self._sigterm:
            return "SIGTERM"
        if isinstance(exc, SystemExit):
            return "SystemExit: exit status %s" % (exc.code,)
        return _wire.reason_of(exc)

    # ---- what the sender thread asks ----

    def _ping_soon(self):
        self._next_ping = 0
        if self._sender is not None:
            self._sender.kick()

    def _ping_body(self):
        body = {"phase": self.name, "event": "ping"}
        self._add_progress(body)
        ev = self._eval
        if ev is not None:
            es, et = _wire.count(ev[0]), _wire.count(ev[1], 1)
            if es is not None:
                body["eval_step"] = es
                if et is not None and et >= es:
                    body["eval_total"] = et
        busy = self._busy
        if busy is not None and _moving(self, busy):
            body["busy"] = busy[0]
        if self._dirs:
            body["dirs"] = self._dirs
        with self._lock:
            saved, home = self._saves.popleft() if self._saves else (None, None)
            self._saves_taken.notify_all()
            if home:
                # The server books a save on the filesystem of the last dir
                # a ping names: the one the checkpoint was written to.
                self._dirs = ([d for d in self._dirs if d != home] + [home])[-_wire.MAX_DIRS:]
                body["dirs"] = self._dirs
            more = bool(self._saves)
        if saved is not None:
            body["save_bytes"] = saved
        if more:
            self._next_ping = 0  # the next save's ping follows at once
        return body

    def _add_progress(self, body, step_zero=False, with_loss=True):
        step, total, loss = self._progress
        s, t = _wire.count(step), _wire.count(total, 1)
        if s is None and step_zero and t is not None:
            s = 0  # a known total and no step yet: training is at step 0
        if s is not None:
            body["step"] = s
            if t is not None and t >= s:
                body["total"] = t
        if self._diverged is not None:
            loss = self._diverged
        if with_loss and loss is not None and self._sender is not None:
            value = self._sender.read_value(loss)
            if value is not None:
                body["loss"] = value

    def _measure(self, path, before):
        try:
            n = _size_of(path)
        except OSError as e:
            _sender.say(logging.DEBUG, "lavender: size of %s: %s" % (path, e))
            return
        if before is not None:
            # Saves are booked in the order they were made (the server takes
            # the last as the newest), unless the one before is stuck on its
            # storage.
            before.join(ORDER_WAIT)
        with self._lock:
            self._saves.append((n, _home(path, self._dirs)))
        if self._state == "running":
            self._ping_soon()


class _Said:
    """What this process has warned of already, so that a warning that
    every phase (or every add_dirs) would repeat is said once."""

    MAX = 256

    def __init__(self):
        self._lock = threading.Lock()
        self._keys = set()

    def once(self, key, text):
        with self._lock:
            if key in self._keys or len(self._keys) >= self.MAX:
                return
            self._keys.add(key)
        _sender.say(logging.WARNING, text)


_said = _Said()


def _shown_path(d):
    # The path's bytes as the filesystem has them: '/data/\xdcbung', which
    # no terminal or log shipper mangles.
    try:
        return repr(os.fsencode(d))[1:]
    except (UnicodeError, TypeError):
        return ascii(d)


# The share of a ping interval a busy thread must spend on the CPU to count
# as moving when its stack looks the same (a long save or a metric computed
# in one C call); a blocked thread spends next to none.
BUSY_CPU_SHARE = 0.05


def _moving(phase, busy):
    """Whether the busy thread moved since the last ping looked at it: a
    different Python stack, or CPU time spent. The first look only sets the
    mark, and says it moved (the work has just begun)."""
    _, ident, native = busy
    frame = sys._current_frames().get(ident)
    stack = []
    while frame is not None and len(stack) < 64:
        stack.append((frame.f_code, frame.f_lasti))
        frame = frame.f_back
    seen = (ident, tuple(stack), _thread_cpu(native), time.monotonic())
    last, phase._busy_seen = phase._busy_seen, seen
    if last is None or last[0] != ident:
        return True
    if last[1] != seen[1]:
        return True
    if last[2] is None or seen[2] is None:
        return False
    return seen[2] - last[2] >= BUSY_CPU_SHARE * (seen[3] - last[3])


def _thread_cpu(native_id):
    """The CPU seconds thread native_id of this process has used (Linux),
    or None."""
    if native_id is None:
        return None
    try:
        with open("/proc/self/task/%d/stat" % native_id, "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return None


try:
    _CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
except (ValueError, OSError, AttributeError):
    _CLOCK_TICKS = 100


def _home(path, dirs):
    """The dir of dirs holding path (the deepest), else the directory path
    sits in, which then becomes a dir of the phase."""
    try:
        path = os.path.abspath(os.fspath(path))
    except (TypeError, ValueError):
        return None
    best = None
    for d in dirs:
        if (path == d or path.startswith(d.rstrip(os.sep) + os.sep)) and (best is None or len(d) > len(best)):
            best = d
    return best or os.path.dirname(path)


def _size_of(path):
    path = os.fspath(path)
    if not os.path.isdir(path):
        return os.stat(path).st_size
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


class _Hooks:
    """The process-wide hooks every live phase shares: sys.excepthook and the
    SIGTERM handler, each chained to what was there before, and one atexit
    handler for phases the process leaves without ending."""

    def __init__(self):
        self._lock = threading.RLock()  # see Phase._lock
        self.phases = []
        self._prev_excepthook = None
        self._prev_sigterm = None
        self._sigterm_set = False
        self._in_sigterm = False
        self._atexit = False
        # The phases that ended ok with no phase begun since, and the
        # uncaught exception the process had already seen then: an uncaught
        # exception after their end (a save, a hub push, a callback after
        # ours) fails them at exit.
        self._ended_ok = []
        self._seen_exception = None

    def add(self, phase):
        with self._lock:
            self._ended_ok = []  # a new phase: what fails from now on fails it
            self.phases.append(phase)
            if self._prev_excepthook is None:
                self._prev_excepthook = sys.excepthook
                sys.excepthook = self._excepthook
            if not self._atexit:
                self._atexit = True
                atexit.register(self._at_exit)

    def ended_ok(self, phase):
        with self._lock:
            if phase not in self._ended_ok:
                self._ended_ok.append(phase)
            self._seen_exception = getattr(sys, "last_value", None)
            if not self._atexit:
                self._atexit = True
                atexit.register(self._at_exit)

    def forget_ended_ok(self, phase):
        with self._lock:
            if phase in self._ended_ok:
                self._ended_ok.remove(phase)

    def remove(self, phase):
        with self._lock:
            if phase in self.phases:
                self.phases.remove(phase)
            if self.phases:
                return
            if self._prev_excepthook is not None and sys.excepthook == self._excepthook:
                sys.excepthook = self._prev_excepthook
                self._prev_excepthook = None
            if self._sigterm_set:
                self._restore_sigterm()

    def catch_sigterm(self):
        """Learns of SIGTERM without changing what it does: where SIGTERM has
        its default action, a handler that ends the phases and then dies by
        SIGTERM as the default would; where a handler is set, one that tells
        the phases and calls it. SIG_IGN (and a handler set from C) is left
        alone. Only the main thread can set handlers."""
        with self._lock:
            if threading.current_thread() is not threading.main_thread():
                return
            try:
                current = signal.getsignal(signal.SIGTERM)
                if current == self._on_sigterm or current in (signal.SIG_IGN, None):
                    return
                self._prev_sigterm = current
                signal.signal(signal.SIGTERM, self._on_sigterm)
                self._sigterm_set = True
            except (ValueError, OSError, AttributeError):
                pass

    def _restore_sigterm(self):
        # Only where ours is still the handler: one that chained ours keeps
        # it, and may set it back later (Lightning's teardown does), when it
        # must still stand for the handler it replaced.
        try:
            if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._prev_sigterm if self._prev_sigterm is not None else signal.SIG_DFL)
                self._sigterm_set, self._prev_sigterm = False, None
        except (ValueError, OSError):
            pass

    def _excepthook(self, exc_type, exc, tb):
        prev = self._prev_excepthook or sys.__excepthook__  # ending the last phase restores it
        try:
            for p in list(self.phases):
                p.fail(exc)
        finally:
            prev(exc_type, exc, tb)

    def _on_sigterm(self, signum, frame):
        phases = list(self.phases)
        for p in phases:
            p._sigterm = True
        if self._in_sigterm:
            return  # called again through a handler that chained ours
        try:
            owner = signal.getsignal(signal.SIGTERM)
        except (ValueError, OSError):
            owner = None
        if owner != self._on_sigterm:
            # Whoever set the handler now (Lightning's, which stops at the
            # next batch and exits 0) chained ours as the handler it found:
            # it owns SIGTERM, and ours stands for the default action it
            # replaced, which it never runs. Knowing of the signal is all.
            return
        prev = self._prev_sigterm
        if callable(prev):
            # The handler that was there decides: if it raises, the phase
            # ends failed with "SIGTERM" where the exception lands.
            self._in_sigterm = True
            try:
                prev(signum, frame)
            finally:
                self._in_sigterm = False
            return
        # The default action: end every phase, then die by SIGTERM as the
        # sender of the signal expects.
        for p in phases:
            p.fail("SIGTERM")
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except (ValueError, OSError):
            pass
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)  # the signal is delivered before this returns

    def _at_exit(self):
        # Python sets sys.last_value for the uncaught exception that ends
        # the process before it runs atexit: the process dies by it.
        # An interactive session (the REPL, IPython, Jupyter) sets it for
        # every error it shows and goes on: there it says nothing of the exit.
        exc = getattr(sys, "last_value", None)
        interactive = hasattr(sys, "ps1") or sys.flags.interactive or "IPython" in sys.modules
        if exc is not None and exc is not self._seen_exception and not interactive:
            for p in list(self._ended_ok):
                p.fail(exc)
        for p in list(self.phases):
            if p.running:
                p.fail("SIGTERM" if p._sigterm else "the process exited before the phase ended")
            else:
                p._end(OK, None)  # armed, never started: nothing to say


_hooks = _Hooks()
