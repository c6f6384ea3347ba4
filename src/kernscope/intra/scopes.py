"""Named scopes: ``prof = prof.enter("load")`` ... ``prof = prof.exit("load")`` inside a Triton kernel.

A scope name becomes a task id at compile time: a 15-bit FNV-1a hash of the name in the upper half of
the 16-bit task field (32768..65535), so scope ids never collide with the small integer task types of
``record(is_start, task_type)``. The host learns the names back from the kernels' source (every
``.enter("...")``/``.exit("...")`` literal), from names passed explicitly, and from the names the compiler
saw in this process; two names with the same id in one kernel are reported, not silently merged.
CPU only: no triton import.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

from ..errors import KernscopeError

SCOPE_BASE = 1 << 15
_NAMES = re.compile(r"""\.(?:enter|exit)\(\s*(?:name\s*=\s*)?(["'])(.+?)\1""")


def scope_id(name: str) -> int:
    """The task id of scope ``name`` (32768..65535), the same on the device and the host."""
    h = 0x811C9DC5
    for b in name.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return SCOPE_BASE | ((h ^ (h >> 15)) & (SCOPE_BASE - 1))


def names_in_source(source: str) -> list[str]:
    """Scope names used by ``.enter("...")`` / ``.exit("...")`` in kernel source text, in first-use order."""
    seen: list[str] = []
    for m in _NAMES.finditer(source):
        if m.group(2) not in seen:
            seen.append(m.group(2))
    return seen


def _source(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    src = getattr(obj, "src", None)  # a triton JITFunction keeps its source
    if isinstance(src, str):
        return src
    fn = getattr(obj, "fn", obj)
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def scope_table(kernels: Iterable[Any] = (), names: Iterable[str] = ()) -> dict[int, str]:
    """``{task id: scope name}`` for the scopes of ``kernels`` (JIT functions or source text) and ``names``.

    Raises:
        KernscopeError: two different names hash to the same id (rename one of them).
    """
    table: dict[int, str] = {}
    all_names = list(names)
    for k in kernels:
        all_names += names_in_source(_source(k))
    for n in all_names:
        i = scope_id(n)
        if i in table and table[i] != n:
            raise KernscopeError(f"scope names {table[i]!r} and {n!r} have the same id {i}: rename one of them")
        table[i] = n
    return table


def merge_names(task_names: Any = (), kernels: Iterable[Any] = (), scopes: Iterable[str] = ()) -> list[str] | dict[int, str]:
    """Names for the decoder: ``task_names`` (a list for task types 0, 1, ... or a {id: name} map) plus the
    scopes of ``kernels`` and ``scopes``. A list stays a list when there are no scopes."""
    table = scope_table(kernels, scopes)
    if isinstance(task_names, dict):
        return {**{int(k): str(v) for k, v in task_names.items()}, **table}
    names = [str(n) for n in task_names]
    if not table:
        return names
    return {**dict(enumerate(names)), **table}
