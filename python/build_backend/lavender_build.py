"""A PEP 517 build backend for lavender-client in the standard library
alone: the package is pure Python, so a wheel is a zip of lavender/ and its
metadata. pip uses it through pyproject.toml's backend-path, so installing
needs no network and no setuptools."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "lavender-client"
DIST = "lavender_client"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(HERE, "lavender")
TAG = "py3-none-any"


# The repository's one version, which the Go binary embeds too: at the top
# of an sdist built from a checkout, or beside go.mod in the checkout.
VERSION_FILES = (os.path.join(HERE, "VERSION"), os.path.join(os.path.dirname(HERE), "VERSION"))


def _version_file():
    for path in VERSION_FILES:
        if os.path.isfile(path):
            return path
    raise RuntimeError("no VERSION file at %s" % " or ".join(VERSION_FILES))


def _version():
    with open(_version_file(), encoding="utf-8") as f:
        version = f.read().strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)", version):
        raise RuntimeError("%s: %r is not a version" % (_version_file(), version))
    return version


def _version_module():
    # The installed package reads its version from this file; a checkout
    # run in place reads VERSION instead (lavender/__init__.py).
    return ('version = "%s"\n' % _version()).encode()


def _metadata():
    return "\n".join([
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + _version(),
        "Summary: Report training phases (progress, loss, failures) to a lavender exporter",
        "Requires-Python: >=3.8",
        "License: Apache-2.0",
        "",
    ])


def _sources():
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                full = os.path.join(root, f)
                yield full, os.path.relpath(full, HERE).replace(os.sep, "/")


def _wheel(wheel_directory, files):
    info = "%s-%s.dist-info" % (DIST, _version())
    name = "%s-%s-%s.whl" % (DIST, _version(), TAG)
    files = list(files) + [
        (info + "/METADATA", _metadata().encode()),
        (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: lavender_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG).encode()),
        (info + "/top_level.txt", b"lavender\n"),
    ]
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for arcname, data in files:
            zf.writestr(zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))
        record.append(info + "/RECORD,,")
        zf.writestr(zipfile.ZipInfo(info + "/RECORD", date_time=(1980, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_sdist = get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = [(arc, _read(full)) for full, arc in _sources()]
    return _wheel(wheel_directory, files + [("lavender/_version.py", _version_module())])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: a .pth file puts the source tree on sys.path.
    return _wheel(wheel_directory, [(DIST + ".pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (DIST, _version())
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        paths = [os.path.join(HERE, "pyproject.toml"), os.path.join(HERE, "build_backend", "lavender_build.py")]
        paths += [full for full, _ in _sources()]
        for full in paths:
            tf.add(full, arcname=base + "/" + os.path.relpath(full, HERE).replace(os.sep, "/"), recursive=False)
        tf.add(_version_file(), arcname=base + "/VERSION", recursive=False)
        meta = ("%s\n" % _metadata()).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(meta)
        tf.addfile(ti, io.BytesIO(meta))
    return name
