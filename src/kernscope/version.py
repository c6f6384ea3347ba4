"""The package version and a fingerprint of its code (a leaf module: the parse cache keys on them without
importing the package)."""

from __future__ import annotations

import functools
import os

try:  # the builtin module: ``hashlib`` would load OpenSSL (~5 ms of a cached answer, :mod:`.replay`)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter built without it
    from hashlib import blake2b

__version__ = "0.2.0"
#: version of the JSON outputs' contract (``docs/schema/*.schema.json``): the minor part grows when fields are
#: added, the major part when a field is removed or changes meaning or unit
SCHEMA_VERSION = "5.0"

#: files whose change changes what kernscope computes or renders
_CODE_SUFFIXES = (".py", ".toml", ".c", ".so", ".js", ".css", ".html")


@functools.cache
def code_fingerprint() -> str:
    """A digest of the package's code files (relative path, size, modification time): cache entries and stored
    outputs made by other code (an edited checkout, a reinstall under the same version number) are never read.
    One ``stat`` per file (about 150), once per process."""
    return fingerprint_of(os.path.dirname(os.path.abspath(__file__)))


def fingerprint_of(root: str) -> str:
    """:func:`code_fingerprint` of the package tree at ``root`` (its code files, ``__pycache__`` folders left out)."""
    h = blake2b(digest_size=8)
    todo = [""]  # folders relative to root, walked in name order (os.walk's bookkeeping was half of the 3-5 ms)
    while todo:
        rel = todo.pop()
        with os.scandir(os.path.join(root, rel)) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    subdirs.append(os.path.join(rel, e.name))
            elif e.name.endswith(_CODE_SUFFIXES):
                st = e.stat()
                h.update(f"{os.path.join(rel, e.name)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        todo.extend(reversed(subdirs))
    return h.hexdigest()
