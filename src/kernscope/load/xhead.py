"""A head start for the plan of a large JAX profile's windowed ``analyze``: its lines found and their time index made on
a thread while the command is still importing.

A cold ``kernscope analyze`` of a plain ``.xplane.pb`` of :data:`~kernscope.files.WINDOWED_FROM` bytes or more reads it
a time window at a time (:mod:`kernscope.analyze.windows`), after a plan (:func:`kernscope.load.xplan.plan_near`)
whose first and largest part is one walk of every line's bytes in C (``ks_line_index``: 0.23 s of a 210 MB profile, a
tenth of the run). The command spends its first ~0.3 s importing under Python's lock, one of two cores idle.
:meth:`XHeadStart.begin` starts a thread at once that maps the file, finds its planes' lines (:func:`xspace_lines`:
numpy and the compiled reader, no polars) and makes the index (:func:`~kernscope.load.xscan.line_index`, the lock
released, the pages walked given back as for the plan's own walk).

The plan takes the index (:meth:`XHeadStart.take`) where the file is the one the thread read (its identity, not
changed within :data:`~kernscope.load.headstart.RACY_NS` of the start) and the lines are the plan's own (offsets and
lengths equal, the same stride); else it walks the lines itself. The index is the same either way (a test checks it);
where the thread failed (a damaged file), the plan reads the file and says what is wrong.
"""

from __future__ import annotations

import contextlib
import mmap
import threading
from typing import TYPE_CHECKING

from .headstart import RACY_NS, identity, mapped_file

if TYPE_CHECKING:
    import numpy as np

    from .xscan import TimeIndex


class XHeadStart:
    """The time index of a JAX profile's lines (:func:`~kernscope.load.xscan.line_index` at
    :data:`~kernscope.load.xscan.NEAR_STRIDE`), made on a thread from :meth:`begin`; :meth:`take` hands it to the
    plan, :meth:`close` drops it."""

    def __init__(self, path: str, ident: tuple[int, ...], data: mmap.mmap) -> None:
        self.path = path
        self.identity = ident
        self._data: mmap.mmap | None = data
        self._index: TimeIndex | None = None
        self._stride = 0
        #: why the thread made no index (an exception's text), for tests
        self.failed: str | None = None
        #: whether a plan took the index (``--timings`` says so)
        self.taken = False
        self._thread = threading.Thread(target=self._run, name="kernscope-xhead", daemon=True)
        self._thread.start()

    @classmethod
    def begin(cls, path: str, min_bytes: int) -> XHeadStart | None:
        """A head start for the plain XSpace profile at ``path``, or None where it would not pay or could not be
        trusted: no compiled library, a file under ``min_bytes``, gzipped, or changed within
        :data:`~kernscope.load.headstart.RACY_NS` of now."""
        mapped = mapped_file(path, min_bytes, RACY_NS, access=mmap.ACCESS_READ)
        if mapped is None:
            return None
        _, ident, data = mapped
        if data[:2] == b"\x1f\x8b":  # (a gzipped profile is inflated whole before its decode)
            data.close()
            return None
        return cls(path, ident, data)

    def _run(self) -> None:
        try:
            from .protowire import as_array
            from .xscan import NEAR_STRIDE, RELEASE_BYTES, line_index, xspace_lines

            assert self._data is not None
            buf = as_array(self._data)
            off, size = xspace_lines(buf)
            # (the mapping is read-only: the pages walked are given back, as the plan's own walk does)
            self._index = line_index(buf, off, size, NEAR_STRIDE, release=RELEASE_BYTES)
            self._stride = NEAR_STRIDE
        except Exception as e:  # (any fault: the plan walks the lines itself and says what is wrong)
            self.failed = f"{type(e).__name__}: {e}"
            self._index = None

    def take(self, path: str, buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, stride: int
             ) -> TimeIndex | None:
        """The index of ``path``'s lines at ``line_off``/``line_len`` (bytes of ``buf``, the plan's mapping of the
        file) every ``stride`` events, reading ``buf`` from now on; None where the thread's is not that (another file
        or one changed since: by its identity; other lines or stride; or none made). Waits for the thread; the head start is closed
        after."""
        import dataclasses

        import numpy as np

        self._thread.join()
        index, self._index = self._index, None
        try:
            if (index is None or identity(path) != self.identity or stride != self._stride
                    or buf.size != self.identity[2] or not np.array_equal(index.line_off, line_off)
                    or not np.array_equal(index.line_len, line_len)):
                return None
            self.taken = True
            return dataclasses.replace(index, buf=buf)
        finally:
            del index
            self.close()

    def close(self) -> None:
        """Wait for the thread and drop what it made (the file's mapping closed)."""
        self._thread.join()
        self._index = None
        data, self._data = self._data, None
        if data is not None:
            with contextlib.suppress(BufferError, ValueError):  # (an array still views it: closed when it goes)
                data.close()

    def __repr__(self) -> str:
        return f"XHeadStart({self.path!r})"
