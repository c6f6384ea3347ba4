"""How the ``kernscope`` process ends: every failure is one line on stderr and an exit code, never a traceback.

==== =========================================================================================
code meaning
==== =========================================================================================
0    done (also when the reader of a pipe went away)
1    some rank files failed (results cover the others), out of memory, or a bug ("internal error")
2    bad input or arguments, or an output that cannot be written (one line naming the file)
3    an empty answer for a reason the trace shows (no GPU activity; a step without GPU work)
130  interrupted
==== =========================================================================================
"""

from __future__ import annotations

import errno
import os
import warnings
from collections.abc import Callable

import click

from .errors import EXIT_EMPTY, EmptyAnswer, KernscopeError, PartialFailure

EXIT_BAD_INPUT = 2

#: errno values of an output that cannot be written: no space, over quota, file too large, read-only, I/O error
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def guarded(command: Callable[[], object], notice: Callable[[str], None]) -> int:
    """Run ``command`` and map what it raises to one line on stderr and an exit code (the table above). A cache
    notice raised as a warning by a call without a ``notify`` becomes one plain line through ``notice``."""

    def show(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
        if category.__name__ == "CacheNotice":  # by name: importing the cache module here would import polars early
            notice(str(message))
        else:
            click.echo(f"kernscope: warning: {message}", err=True)

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show
            command()
    except KernscopeError as e:
        click.echo(f"kernscope: error: {e}", err=True)
        return EXIT_BAD_INPUT
    except PartialFailure as e:
        click.echo(f"kernscope: {e}", err=True)
        return 1
    except EmptyAnswer as e:
        click.echo(f"kernscope: {e}", err=True)
        return EXIT_EMPTY
    except click.exceptions.Abort:
        click.echo("kernscope: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return EXIT_BAD_INPUT
    except MemoryError:
        click.echo("kernscope: error: out of memory (try --max-memory, or fewer/smaller traces)", err=True)
        return 1
    except BrokenPipeError:
        return 0
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            return internal(e)
        click.echo(f"kernscope: error: cannot write the output: {e.strerror or e}", err=True)  # disk full, read-only
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug: still one line unless asked for the traceback
        return internal(e)
    return 0


def internal(e: BaseException) -> int:
    """A bug: one line, exit 1; with ``KERNSCOPE_DEBUG=1`` the traceback instead."""
    if os.environ.get("KERNSCOPE_DEBUG"):
        raise e
    click.echo(f"kernscope: internal error: {type(e).__name__}: {e} (set KERNSCOPE_DEBUG=1 for a traceback)", err=True)
    return 1
