"""Where a command's output bytes go: a regular file written whole (a temporary file beside it, then a rename), a
FIFO or device written as a stream, or stdout. Only ``os`` and ``stat`` are imported, because a cached
``kernscope analyze`` writes its stored output through here before anything else is imported (:mod:`.replay`).
:mod:`.files` builds its ``atomic_path`` and ``atomic_dir`` on :func:`prepare`.
"""

from __future__ import annotations

import os
import stat
import sys

from .errors import KernscopeError


def default_mode() -> int:
    """File mode a plain ``open(..., 'w')`` would give under the current umask (0644 under 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def stream_target(target: str | os.PathLike[str]) -> bool:
    """True for a FIFO or character device (``-o /dev/stdout``, a named pipe): written as a stream, never
    replaced by a regular file."""
    try:
        st = os.stat(target)
    except OSError:
        return False
    return stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)


def sweep(folder: str | os.PathLike[str], prefix: str) -> None:
    """Remove what an earlier write left in ``folder`` when its process was killed (``kill -9``): our temporaries
    (``<prefix><pid>.<random>``) whose writing process no longer runs. A live writer's are kept."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    for n in names:  # a handful of leftovers, not per event
        pid_text = n[len(prefix):].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # its writer is alive (or another user's: not ours to judge)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError, OSError):
            continue
        p = os.path.join(folder, n)
        if os.path.isdir(p) and not os.path.islink(p):
            import shutil

            shutil.rmtree(p, ignore_errors=True)
        else:
            discard(p)


def prepare(target: str | os.PathLike[str]) -> tuple[str, str, int]:
    """(the file to replace, a new empty temporary file beside it, the mode to give it) for writing ``target``
    whole; the caller writes the temporary file, ``chmod``s it and renames it onto the file.

    ``target``'s folder must exist (it is never created). A new file gets the umask's default mode; a replaced
    one keeps its mode. A symlink at ``target`` is followed (its destination is replaced, the link stays), as a
    shell redirection would; a dangling one, a directory, a FIFO or a device at ``target`` is an error.
    """
    given = os.fspath(target)
    is_link = os.path.islink(given)
    t = os.path.realpath(given) if is_link else given
    if is_link and not os.path.exists(t):
        raise KernscopeError(f"{given}: is a symbolic link to {t}, which does not exist; give the file itself")
    if os.path.isdir(t):
        raise KernscopeError(f"{given}: is a directory; give a file name")
    mode = default_mode()
    try:
        st = os.stat(t)
    except OSError:
        st = None
    if st is not None:
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would be replaced by a regular file
            raise KernscopeError(f"{given}: is not a regular file (a FIFO, device or socket); kernscope writes regular "
                                 "files: give a file name")
        mode = stat.S_IMODE(st.st_mode)  # replacing a file keeps its permissions (a 0600 file stays private)
    parent, name = os.path.split(t)
    parent = parent or "."
    if not os.path.isdir(parent):  # never create folders the user did not ask for (a typo would write elsewhere)
        raise KernscopeError(f"{given}: the folder {parent} does not exist; create it first")
    prefix = f".{name}."
    sweep(parent, prefix)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):  # as tempfile.mkstemp: a random name, made only if new
        tmp = os.path.join(parent, f"{prefix}{os.getpid()}.{os.urandom(6).hex()}.tmp")
        try:
            os.close(os.open(tmp, flags, 0o600))
        except FileExistsError:
            continue
        except OSError as e:
            raise KernscopeError(f"{given}: cannot write output ({e.strerror})") from None
        return t, tmp, mode
    raise KernscopeError(f"{given}: cannot write output (no free temporary name beside it)")


def commit(tmp: str, t: str, mode: int) -> None:
    """Give the written temporary file ``tmp`` its ``mode`` and rename it onto ``t`` (removed on failure)."""
    try:
        os.chmod(tmp, mode)
        os.replace(tmp, t)
    except OSError as e:
        discard(tmp)
        raise KernscopeError(f"{t}: cannot write output ({e.strerror or e})") from None


def discard(tmp: str) -> None:
    """Remove ``tmp`` if it is there."""
    try:  # noqa: SIM105 - contextlib's import is most of this module's cost (see the module's docstring)
        os.unlink(tmp)
    except OSError:
        pass


class Temporary:
    """``with Temporary(target) as tmp:`` write the file ``tmp`` (:func:`prepare`); when the block ends it replaces
    ``target``, and when the block fails it is removed (an ``OSError`` becomes one line naming the file)."""

    def __init__(self, target: str | os.PathLike[str]) -> None:
        self.target, self.path, self.mode = prepare(target)

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: object) -> None:
        if error is None:
            commit(self.path, self.target, self.mode)
            return
        discard(self.path)
        if isinstance(error, OSError):
            raise KernscopeError(f"{self.target}: cannot write output ({error.strerror or error})") from None


def write_bytes(target: str | os.PathLike[str], data: bytes) -> None:
    """``data`` to ``target``: atomically (temp file, rename) for a file, as a stream for a FIFO or device."""
    if stream_target(target):
        try:
            with open(target, "wb") as f:
                f.write(data)
        except OSError as e:
            raise KernscopeError(f"{os.fspath(target)}: cannot write output ({e.strerror or e})") from None
        return
    with Temporary(target) as tmp, open(tmp, "wb") as f:
        f.write(data)


def emit_bytes(body: bytes, output: str | None) -> None:
    """``body`` to ``output`` (:func:`write_bytes`), or to stdout ending in a newline."""
    if output:
        write_bytes(output, body)
        return
    body = body if body.endswith(b"\n") else body + b"\n"
    out = getattr(sys.stdout, "buffer", None)
    if out is not None:
        out.write(body)
    else:  # a text stream (tests, notebooks)
        sys.stdout.write(body.decode("utf-8", "replace"))
    sys.stdout.flush()
