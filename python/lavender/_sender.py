"""The one thread that talks to the exporter.

Training code never waits on the network: start, end and save reports go
into a small bounded queue, and the pings are built by this thread itself,
every phase's `every` seconds, from what the phase last recorded. Every
failure is caught here and reported once, when it begins, not once a
ping."""

import base64
import collections
import http.client
import json
import logging
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse

from . import _wire

log = logging.getLogger("lavender")


def say(level, text):
    """Logs one line of the client's on the lavender logger, every URL in it
    redacted: every message goes through here."""
    if log.isEnabledFor(level):
        log.log(level, "%s", _wire.redact(text))

# A heartbeat is a few hundred bytes to a process on the same host: an
# answer that takes longer than this is not coming.
REQUEST_TIMEOUT = 2.0
# How long end() waits for its heartbeat: a ping already in flight, then
# the end itself.
END_WAIT = 2 * REQUEST_TIMEOUT + 0.5
MAX_OUTBOX = 64
# The exporter's name is looked up once, on a thread of its own, and kept: a
# lookup is not bounded by REQUEST_TIMEOUT (glibc waits 5 s on a nameserver
# that is down before it asks the next), and one per request would eat the
# end's wait. It is looked up again only when no address it had takes a
# connection, at most this often.
RESOLVE_AGAIN_AFTER = 10.0
# How long the sender waits for the first lookup before it gives a
# heartbeat up; the lookup itself goes on.
RESOLVE_WAIT = 30.0
# How long the sender waits for a loss that lives on a GPU: reading it syncs
# with the device, which a hung collective never lets happen.
VALUE_WAIT = 0.5


class _Item:
    __slots__ = ("body", "done", "delivered")

    def __init__(self, body):
        self.body, self.done, self.delivered = body, threading.Event(), False


class Sender:
    """Posts heartbeats to one exporter from one daemon thread."""

    def __init__(self, base_url, env=None, timeout=REQUEST_TIMEOUT):
        env = os.environ if env is None else env
        self.base_url = base_url
        parts = urllib.parse.urlsplit(base_url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._resolver = _Resolver(self._host, self._port or (443 if self._https else 80))
        self._path = parts.path + _wire.HEARTBEAT_PATH
        self._timeout = timeout
        self._headers = {"Content-Type": "application/json", "User-Agent": "lavender-client"}
        self._ssl = None
        self._setup_problem = None
        self._configure(env)
        self._cond = threading.Condition()
        self._outbox = collections.deque()
        self._phases = []
        self._thread = None
        self._failing = None  # what the last report said; None while heartbeats go through
        self._reported = set()
        self._names = {}  # a phase's name -> the ASCII name it goes by, where the exporter refused it
        self._last_status = None
        self._last_answer = self._last_error = ""  # the last answer, shortened and whole
        self._reader = _ValueReader()
        # From the phase's making (Trainer(...), before the model loads),
        # not its first heartbeat: the answer is in by the time one goes.
        self._resolver.lookup()

    def _configure(self, env):
        user = env.get("LAVENDER_USERNAME", "")
        password_file = env.get("LAVENDER_PASSWORD_FILE", "")
        if user or password_file:
            try:
                with open(password_file) as f:
                    password = f.read().strip()
                token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
                self._headers["Authorization"] = "Basic " + token
            except OSError as e:
                self._setup_problem = "LAVENDER_PASSWORD_FILE: %s; sending without basic auth" % e.strerror
        ca = env.get("LAVENDER_TLS_CA_FILE", "")
        if self._https:
            try:
                self._ssl = ssl.create_default_context(cafile=ca or None)
            except (OSError, ssl.SSLError) as e:
                self._setup_problem = "LAVENDER_TLS_CA_FILE %s: %s" % (ca, e)
                self._ssl = ssl.create_default_context()

    # ---- used by phases, from any thread ----

    def post(self, body, wait=0.0):
        """Queues one heartbeat; waits up to wait seconds for it to be
        answered and says whether it was."""
        item = _Item(body)
        with self._cond:
            if len(self._outbox) >= MAX_OUTBOX:
                self._once("outbox", "too many heartbeats waiting for %s; dropping one" % self.base_url)
                return False
            self._outbox.append(item)
            self._ensure_thread()
            self._cond.notify()
        if wait > 0:
            item.done.wait(wait)
        return item.delivered

    def watch(self, phase):
        """Starts pinging phase every phase.every seconds."""
        with self._cond:
            if phase not in self._phases:
                self._phases.append(phase)
            self._ensure_thread()
            self._cond.notify()

    def unwatch(self, phase):
        with self._cond:
            if phase in self._phases:
                self._phases.remove(phase)

    def kick(self):
        """Wakes the thread to look at the phases' due pings now."""
        with self._cond:
            self._cond.notify()

    def read_value(self, value):
        return self._reader.read(value)

    # ---- the thread ----

    def _ensure_thread(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="lavender-sender", daemon=True)
            self._thread.start()

    def _next(self):
        with self._cond:
            while True:
                if self._outbox:
                    return self._outbox.popleft(), None
                now = time.monotonic()
                wait = None
                for p in self._phases:
                    if p._next_ping <= now:
                        p._next_ping = now + p.every
                        return None, p
                    left = p._next_ping - now
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def _run(self):
        if self._setup_problem:
            self._once("setup", self._setup_problem)
        while True:
            try:
                item, phase = self._next()
                if item is not None:
                    item.delivered = self._send(item.body)
                    item.done.set()
                else:
                    body = phase._ping_body()
                    if body is not None:
                        self._send(body)
            except Exception as e:  # the thread must outlive anything
                self._once("thread", "heartbeat thread: %s" % _wire.reason_of(e))
                time.sleep(0.1)

    def _send(self, body):
        """Posts body and says whether the exporter took it. A body the
        exporter refuses (400) for a field it names goes again without that
        field and those that go with it: one field it will not take (a
        directory, a field an older exporter does not know) must not cost
        the start its pid, the pings their step and loss, or the end. A
        ping refused for no field it names goes as a bare ping, so the
        phase never looks silent."""
        name = body.get("phase")
        if name in self._names:
            body = dict(body, phase=self._names[name])
        for _ in range(MAX_FIELDS_DROPPED + 1):
            if self._deliver(body, quiet_400=True):
                return True
            if self._last_status != 400:
                return False
            if self._last_error.startswith("bad phase name") and self._ascii_name(body):
                body = dict(body, phase=self._names[name])
                continue
            fields = refused_fields(self._last_error, body)
            if not fields:
                break
            self._once("400 " + fields[0], "%s: %s: HTTP 400: %s; sending it without %s (training goes on; said once)"
                       % (self.base_url, self._event(body), self._last_answer, ", ".join(fields)))
            body = {k: v for k, v in body.items() if k not in fields}
        else:
            self._fail(400, "%s: %s: HTTP 400: %s" % (self.base_url, self._event(body), self._last_answer))
            return False
        if body.get("event") != "ping" or len(body) <= 2:
            self._fail(400, "%s: %s: HTTP 400: %s" % (self.base_url, self._event(body), self._last_answer))
            return False
        # The same refusal (a step past the total, say) comes at every ping,
        # its numbers changing: it is one thing to say, and said once.
        self._once("400 " + re.sub(r"[0-9]+", "N", self._last_answer),
                   "%s: %s: HTTP 400: %s; pinging without its fields (training goes on; said once)"
                   % (self.base_url, self._event(body), self._last_answer))
        return self._deliver({"phase": body["phase"], "event": "ping"})

    def _ascii_name(self, body):
        """Takes the phase's name in ASCII for its heartbeats from now on,
        once the exporter refused its name though the client's rule took
        it: an exporter whose Unicode tables are older than this Python's
        finds a newer character unprintable. Says whether there is such a
        name to try."""
        name = body.get("phase")
        if not isinstance(name, str) or name in self._names or len(self._names) >= MAX_REPORTED:
            return False
        plain = _wire.ascii_name(name)
        if plain == name:
            return False
        self._names[name] = plain
        self._once("name " + name, "%s: %s: HTTP 400: %s; reporting the phase as %r (training goes on; said once)"
                   % (self.base_url, self._event(body), self._last_answer, plain))
        return True

    @staticmethod
    def _event(body):
        return "%s %r" % (body.get("event"), body.get("phase"))

    def _deliver(self, body, quiet_400=False):
        """Posts body and says whether the exporter took it; with quiet_400,
        a 400 is left to the caller to report."""
        self._last_status = None
        event = self._event(body)
        try:
            data = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
            status, answer, self._last_error = self._request(data)
        except Exception as e:  # refused, reset, timed out, garbage (BadStatusLine), TLS
            self._fail(type(e).__name__, "%s: %s: %s" % (self.base_url, event, _wire.reason_of(e)))
            return False
        self._last_status, self._last_answer = status, answer
        if 200 <= status < 300:
            if self._failing is not None:
                say(logging.WARNING, "lavender: heartbeats reach %s again" % self.base_url)
                self._failing = None
            return True
        if status == 409 and body.get("event") == "end":
            # The phase had already ended failed (another rank, the
            # wrapper): the server keeps the failure, as it should.
            say(logging.DEBUG, "lavender: %s: %s" % (event, answer))
            return True
        if status == 400 and quiet_400:
            return False
        if 300 <= status < 400:
            answer = "a redirect, which the heartbeat API never answers: is LAVENDER_URL the exporter's address?"
        self._fail(status, "%s: %s: HTTP %d: %s" % (self.base_url, event, status, answer))
        return False

    def _request(self, data):
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)
        # The connection goes to the addresses looked up before; the Host
        # header and TLS's server name stay the name in the URL.
        conn._create_connection = self._resolver.connect
        try:
            conn.request("POST", self._path or "/", data, self._headers)
            resp = conn.getresponse()
            raw = resp.read(4096)
        finally:
            conn.close()
        answer = raw.decode("utf-8", "replace").strip()
        try:
            answer = str(json.loads(answer).get("error", answer))
        except (ValueError, AttributeError):
            pass
        return resp.status, _wire.short(answer)[:200], answer

    def _fail(self, kind, what):
        # One line when heartbeats start failing, and again only when the
        # failure changes kind or after they went through again.
        if self._failing != kind:
            self._failing = kind
            say(logging.WARNING, "lavender: %s (training goes on; said once)" % what)

    def _once(self, key, what):
        if key not in self._reported and len(self._reported) < MAX_REPORTED:
            self._reported.add(key)
            say(logging.WARNING, "lavender: %s" % what)


# The fields that go together: a heartbeat without one goes without the rest
# (eval_total only with eval_step, boot_id and pid_ns only with pid).
FIELD_GROUPS = (("step", "total"), ("eval_step", "eval_total"), ("pid", "boot_id", "pid_ns"))
# What a heartbeat never goes without.
KEPT_FIELDS = ("phase", "event", "status")
# How the exporter names the field it refused a heartbeat for: the strict
# JSON decoder's pointer (text that is not UTF-8, a value of the wrong
# type), a field check ("bad field: dirs: ..."), an unknown or repeated
# field, and progress it will not take ("bad progress: step 11 is past
# the total of 10").
_FIELD_IN_ERROR = (
    re.compile(r'within "/([a-z_]+)'),
    re.compile(r"^bad field: ([a-z_]+)"),
    re.compile(r'^malformed JSON: (?:unknown field |duplicate field )?"([a-z_]+)"'),
    re.compile(r"^bad (progress)\b"),
)
MAX_FIELDS_DROPPED = 3
MAX_REPORTED = 256


def refused_fields(error, body):
    """The fields of body an exporter's 400 error names, with those that go
    with them; () when it names none body has, or one it never goes
    without."""
    for pattern in _FIELD_IN_ERROR:
        m = pattern.search(error)
        if m is None:
            continue
        name = "step" if m.group(1) == "progress" else m.group(1)
        if name not in body or name in KEPT_FIELDS:
            return ()
        for group in FIELD_GROUPS:
            if name in group:
                return tuple(f for f in group if f in body)
        return (name,)
    return ()


class _Resolver:
    """The exporter's addresses, looked up on a thread of its own and kept
    for every connection after."""

    def __init__(self, host, port):
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._addrs = None  # [(family, type, proto, sockaddr)] once known
        self._error = None  # why there are none
        self._looking = None  # an Event set when the lookup in flight ends
        self._last = None  # when the last lookup began

    def lookup(self):
        """Starts a lookup, unless one is in flight or one began less than
        RESOLVE_AGAIN_AFTER seconds ago; returns the Event of the lookup in
        flight, or None."""
        with self._lock:
            if self._looking is not None:
                return self._looking
            now = time.monotonic()
            if self._last is not None and now - self._last < RESOLVE_AGAIN_AFTER:
                return None
            self._last, done = now, threading.Event()
            self._looking = done
        try:
            threading.Thread(target=self._lookup, args=(done,), name="lavender-resolve", daemon=True).start()
        except RuntimeError as e:  # no thread to be had (interpreter shutdown)
            with self._lock:
                self._looking, self._error = None, self._error or e
            done.set()
        return done

    def _lookup(self, done):
        addrs, error = None, None
        try:
            infos = socket.getaddrinfo(self._host, self._port, 0, socket.SOCK_STREAM)
            addrs = [(family, kind, proto, sockaddr) for family, kind, proto, _, sockaddr in infos] or None
            if addrs is None:
                error = OSError("%s has no address" % self._host)
        except Exception as e:
            error = e
        with self._lock:
            if addrs is not None:
                self._addrs, self._error = addrs, None
            elif self._addrs is None:
                self._error = error  # addresses known before are kept
            self._looking = None
        done.set()

    def addresses(self, wait):
        """The addresses known; while none are, waits up to wait seconds for
        a lookup. Raises why there are none."""
        with self._lock:
            addrs = self._addrs
        if addrs is None:
            done = self.lookup()
            if done is not None:
                done.wait(wait)
            with self._lock:
                addrs, error = self._addrs, self._error
            if addrs is None:
                if error is None or (done is not None and not done.is_set()):
                    error = socket.timeout("looking up %s took more than %gs" % (self._host, wait))
                raise error
        return addrs

    def connect(self, address, timeout=None, source_address=None):
        """socket.create_connection to the addresses known, for
        http.client: tried in the order the lookup gave them."""
        error = None
        for family, kind, proto, sockaddr in self.addresses(RESOLVE_WAIT):
            sock = None
            try:
                sock = socket.socket(family, kind, proto)
                if isinstance(timeout, (int, float)):  # not http.client's "the default"
                    sock.settimeout(timeout)
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                return sock
            except OSError as e:
                error = e
                if sock is not None:
                    sock.close()
        # No address takes a connection: the exporter may have moved (a new
        # pod, a new lease). The next heartbeats go to what a new lookup
        # finds, and this one is not held up by it.
        self.lookup()
        raise error


class _ValueReader:
    """Reads a loss that may live on a GPU on a thread of its own, so a
    device that never answers holds up neither training nor the pings."""

    def __init__(self):
        self._lock = threading.Lock()
        self._busy = False

    def read(self, value):
        if value is None or isinstance(value, (int, float)):
            return _wire.loss_value(value)
        if not getattr(value, "is_cuda", False):
            return _wire.loss_value(value)
        with self._lock:
            if self._busy:
                return None  # the last read never came back: the device is stuck
            self._busy = True
        out, done = [None], threading.Event()

        def work():
            try:
                out[0] = _wire.loss_value(value)
            finally:
                with self._lock:
                    self._busy = False
                done.set()

        threading.Thread(target=work, name="lavender-value", daemon=True).start()
        done.wait(VALUE_WAIT)
        return out[0]


_senders = {}
_senders_lock = threading.Lock()


def sender_for(base_url):
    with _senders_lock:
        s = _senders.get(base_url)
        if s is None:
            s = _senders[base_url] = Sender(base_url)
        return s


def _forget_after_fork():
    # A forked child (a DataLoader worker) has none of the parent's threads,
    # and a lock may have been held at the fork.
    global _senders, _senders_lock
    _senders, _senders_lock = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
