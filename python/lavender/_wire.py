"""What a heartbeat carries, and where it goes: the exporter's URL, the
process's identity, the launcher's rank. Nothing here touches the network."""

import math
import operator
import os
import re
import sys
import traceback
import unicodedata
import urllib.parse
import zlib

DEFAULT_URL = "http://127.0.0.1:9877"
HEARTBEAT_PATH = "/api/v1/heartbeat"
MAX_DIRS = 8
# Linux's PATH_MAX, the longest directory the API takes.
MAX_DIR_BYTES = 4096
# Saves measured and waiting for a ping, as many as the server remembers.
MAX_SAVES = 8
MAX_REASON = 200
# The heartbeat API's bound on a phase name (phaseapi.MaxPhaseNameBytes).
MAX_NAME_BYTES = 64
# A name with nothing left to show.
UNNAMED = "unnamed"

# The launchers' rank variables, most specific first: torchrun, accelerate
# and DeepSpeed set RANK; MPI launchers their own; SLURM_PROCID is the task,
# which is the rank only when nothing above is set (srun starting torchrun
# has one task per node); LOCAL_RANK alone means one node.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK")


# The userinfo of a URL ("alice:S3cret@" in http://alice:S3cret@host:9877),
# with or without a scheme: everything up to the last "@" before the host.
_USERINFO = re.compile(r"""(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)?[^\s/?#'"<>@]+(?:@[^\s/?#'"<>@]+)*@""")
# A URL's query, from "?" to "#" or the end of the URL.
_QUERY = re.compile(r"""(?<=\?)[^\s'"<>#]+""")
REDACTED = "***"


def _redact_query(m):
    # Each value, and a bare component (?S3cret), is replaced; keys stay.
    parts = []
    for part in m.group(0).split("&"):
        key, eq, _ = part.partition("=")
        parts.append(key + "=" + REDACTED if eq else (REDACTED if part else part))
    return "&".join(parts)


def redact(text):
    """text with every URL's userinfo and query values replaced by ***:
    training logs travel (W&B, Slurm, CI), so no message of the client ever
    quotes a password or a token, whatever URL it was given."""
    text = _USERINFO.sub(lambda m: (m.group("scheme") or "") + REDACTED + "@", str(text))
    return _QUERY.sub(_redact_query, text)


def normalize_url(raw):
    """The exporter's base URL from what a user typed: an empty value is the
    default, a missing scheme is http, trailing slashes (and a pasted
    heartbeat path) are dropped. Raises ValueError with the reason, which
    quotes raw redacted."""
    text = (raw or "").strip()
    raw = redact(raw)
    if not text:
        return DEFAULT_URL
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("LAVENDER_URL %r: the scheme must be http or https" % raw)
    if parts.username is not None or parts.password is not None:
        raise ValueError("LAVENDER_URL %r: put credentials in LAVENDER_USERNAME and LAVENDER_PASSWORD_FILE, "
                         "not in the URL" % raw)
    if not parts.hostname:
        raise ValueError("LAVENDER_URL %r: no host" % raw)
    try:
        parts.port
    except ValueError:
        raise ValueError("LAVENDER_URL %r: bad port" % raw) from None
    if parts.query or parts.fragment:
        raise ValueError("LAVENDER_URL %r: a base URL has no query or fragment" % raw)
    path = parts.path.rstrip("/")
    if path.endswith(HEARTBEAT_PATH):
        path = path[: -len(HEARTBEAT_PATH)].rstrip("/")
    return urllib.parse.urlunsplit((scheme, parts.netloc, path, "", ""))


# A run of white space or control characters in a name, which becomes one
# space unless it is spaces alone.
_NAME_SPACE = re.compile("[\\s\x00-\x1f\x7f-\x9f]+")


def phase_name(raw):
    """The name the heartbeat API takes for raw (1 to MAX_NAME_BYTES bytes
    of printable UTF-8 once trimmed), and why it differs, or None. The
    server refuses every heartbeat of any other name, so the phase would be
    lost whole, its failure included. White space and control characters
    become one space, invisible formatting characters (zero-width spaces,
    bidi overrides) go, any other character it cannot show (a byte of the
    command line that is not UTF-8) becomes U+FFFD; a name that is still
    too long is cut on a character boundary and ends in "…" and four hex
    digits of the whole name, so that names that differ only past the cut
    (a sweep's "... lora r=16" and "... lora r=32") stay two phases."""
    name, why = raw.strip(), None
    if not name.isprintable():
        why = "holds characters the heartbeat API refuses"
        name = _NAME_SPACE.sub(lambda m: m.group(0) if m.group(0).strip(" ") == "" else " ", name)
        name = "".join(c if c.isprintable() else "" if unicodedata.category(c) == "Cf" else "\ufffd"
                       for c in name).strip()
    if not name:
        return UNNAMED, "is empty"
    size = len(name.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        tag = "…%04x" % (zlib.crc32(raw.encode("utf-8", "surrogatepass")) & 0xFFFF)
        keep = MAX_NAME_BYTES - len(tag.encode("utf-8"))
        name = name.encode("utf-8")[:keep].decode("utf-8", "ignore").rstrip() + tag
        why = "is %d bytes, more than the %d the heartbeat API takes" % (size, MAX_NAME_BYTES)
    return name, why


def ascii_name(name):
    """name in printable ASCII alone, each other character a "?": a name
    every version of the API's printable test takes."""
    return "".join(c if " " <= c <= "~" else "?" for c in name)


def rank_from_env(env):
    """The global rank the launcher gave this process, 0 when none did."""
    rank = env_rank(env)
    return 0 if rank is None else rank


def env_rank(env):
    """The global rank the launcher gave this process, None when none did."""
    for name in RANK_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            try:
                return max(int(value), 0)
            except ValueError:
                continue
    return None


def torch_rank():
    """The rank of torch.distributed's default process group when the
    program has initialized one, else None. torch.multiprocessing.spawn
    sets no rank variable: the rank goes to init_process_group alone. torch
    is never imported here (it takes seconds, and a program without it
    must not pay for it)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return count(dist.get_rank())
    except Exception:  # a torch that fails here must not fail training
        return None
    return None


def identity():
    """pid, boot_id and pid_ns, as the server needs them to judge the pid;
    boot_id and pid_ns are left out where the system has none."""
    out = {"pid": os.getpid()}
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
        pid_ns = os.readlink("/proc/self/ns/pid")
    except (OSError, ValueError):
        return out
    if boot_id and pid_ns:
        out["boot_id"], out["pid_ns"] = boot_id, pid_ns
    return out


# What the heartbeat API refuses in a directory, and with it the whole
# heartbeat: a control character, or U+FFFD (text already mangled).
_BAD_DIR_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ufffd]")


def absolute_dirs(dirs, left_out=None):
    """Up to MAX_DIRS distinct absolute paths, in order. A path the
    heartbeat API refuses (not valid UTF-8: a Latin-1 byte of a name is a
    lone surrogate here; a control character; over PATH_MAX) is left out,
    and appended to left_out with why."""
    out = []
    for d in dirs:
        if not d:
            continue
        try:
            d = os.path.abspath(os.fspath(d))
            if isinstance(d, bytes):
                d = os.fsdecode(d)
        except (TypeError, ValueError, OSError):
            continue
        problem = dir_problem(d)
        if problem:
            if left_out is not None and (d, problem) not in left_out:
                left_out.append((d, problem))
            continue
        if d not in out:
            out.append(d)
    return out[:MAX_DIRS]


def dir_problem(d):
    """Why the heartbeat API would refuse d as one of a phase's dirs, or
    None."""
    try:
        size = len(d.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if size > MAX_DIR_BYTES:
        return "is over %d bytes" % MAX_DIR_BYTES
    if _BAD_DIR_CHARS.search(d):
        return "holds a control character"
    return None


def loss_value(loss):
    """A loss as JSON carries it: a float, or "NaN", "Infinity",
    "-Infinity"; None when it is not a number."""
    if loss is None or isinstance(loss, (bool, str, bytes)):
        return None
    try:
        x = float(loss)
    except (TypeError, ValueError, RuntimeError):
        return None
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def is_finite_loss(value):
    return value is None or isinstance(value, float)


def count(value, least=0):
    """value as an int of at least least (an int, a numpy or torch integer,
    or an integral float such as 1200.0), or None if it is not one."""
    if value is None or isinstance(value, (bool, str, bytes)):
        return None
    try:
        n = operator.index(value)
    except TypeError:
        try:
            f = float(value)
        except (TypeError, ValueError, RuntimeError):
            return None
        if not math.isfinite(f) or f != int(f):
            return None
        n = int(f)
    return n if n >= least else None


# A line that names an exception and gives its message: "ValueError: bad
# sample 9", "torch.cuda.OutOfMemoryError: CUDA out of memory".
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*(?P<type>[A-Za-z_]\w*): \S")


def reason_of(exc):
    """The line a traceback ends with, on one line, cut to MAX_REASON
    characters with "…": "ValueError: shape mismatch…". A message that
    ends with another exception's line (a DataLoader worker's, re-raised
    with the worker's traceback in the message) gives that line: the cut
    would keep only the message's header."""
    try:
        text = traceback.format_exception_only(type(exc), exc)[-1]
    except Exception:  # a broken __str__ must not hide the failure
        text = type(exc).__name__
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        m = _EXCEPTION_LINE.match(lines[-1])
        if m and (m.group("type") == type(exc).__name__ or m.group("type").endswith(("Error", "Exception"))):
            text = lines[-1]
    return short(text)


def short(text):
    text = " ".join(str(text).split())
    if len(text) > MAX_REASON:
        text = text[: MAX_REASON - 1] + "…"
    return text
