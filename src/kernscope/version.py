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
SCHEMA_VERSION = "1.0"

#: files whose change changes what kernscope computes or renders
_CODE_SUFFIXES = (".py", ".toml", ".c", ".so", ".js", ".css", ".html")


@functools.cache
def code_fingerprint() -> str:
    """A digest of the package's code files (relative path, size, modification time): cache entries and stored
    outputs made by other code (an edited checkout, a reinstall under the same version number) are never read.
    One ``stat`` per file (about 150), once per process."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = blake2b(digest_size=8)
    for base, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(_CODE_SUFFIXES):
                p = os.path.join(base, name)
                st = os.stat(p)
                h.update(f"{os.path.relpath(p, root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()
