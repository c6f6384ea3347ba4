"""Where the cache lives and this user's key for its MACs, with ``os`` and ``stat`` only: a cached ``kernscope
analyze`` looks its stored answer up here before anything else is imported (:mod:`kernscope.replay`).
:mod:`.cache` makes and checks the directory (:func:`kernscope.load.cache.cache_root`)."""

from __future__ import annotations

import os
import stat


def uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def preferred_root() -> str | None:
    """The cache directory the user asked for or the usual one: ``$KERNSCOPE_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/kernscope``, else ``~/.cache/kernscope`` (None without a home directory). Not made or
    checked here."""
    env = os.environ.get("KERNSCOPE_CACHE_DIR")
    if env:
        return env
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return os.path.join(xdg, "kernscope")
    home = os.path.expanduser("~")
    return None if home == "~" else os.path.join(home, ".cache", "kernscope")


def is_private_dir(d: str) -> bool:
    """True when ``d`` is a directory (a link to one is followed) of this user that nobody else can open."""
    try:
        st = os.stat(d)
    except OSError:
        return False
    me = uid()
    return stat.S_ISDIR(st.st_mode) and (me is None or st.st_uid == me) and not st.st_mode & 0o077


def read_private(p: str | os.PathLike[str]) -> bytes:
    """A cache file's bytes, never through a symbolic link (``O_NOFOLLOW``)."""
    fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        return f.read()


def secret(root: str | os.PathLike[str], *, create: bool = True) -> bytes | None:
    """This user's key for the cache's MACs (``root/key``, 32 random bytes, 0600, made on first use when
    ``create``): entries written by anyone without it fail their check. None when it cannot be read or made safely."""
    p = os.path.join(root, "key")
    flags = getattr(os, "O_NOFOLLOW", 0)
    if create:
        try:
            os.makedirs(root, mode=0o700, exist_ok=True)
        except OSError:
            return None
    for _ in range(2):
        try:
            fd = os.open(p, os.O_RDONLY | flags)
        except FileNotFoundError:
            if not create:
                return None
            try:
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | flags, 0o600)
            except FileExistsError:
                continue  # another process made it meanwhile: read theirs
            except OSError:
                return None
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(32))
            continue
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            key = f.read(64)
        me = uid()
        if (me is not None and st.st_uid != me) or st.st_mode & 0o077 or len(key) != 32:
            return None
        return key
    return None
