"""Kernel and op names shortened for a terminal column: the demangled head made compact (no ``void``, no
parameter list, no namespaces, lambdas and ``operator()`` folded), cut in the middle when still too long, and
kept distinct within a table (two different kernels never read the same). Formatting only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..analyze.categories import kernel_head
from .names import shorten_middle

_OPERATOR = re.compile(r"::operator\(\)(?:\(\) const)?")
_LAMBDA = re.compile(r"\{lambda\(([^(){}]*)\)#\d+\}")
_PARAMS = re.compile(r"(?<=[\w\]>])\((?:[^()]|\([^()]*\))*\)")
_EMPTY_LAMBDA = re.compile(r"(?:::)?λ\[\]")
_LAMBDA_JOIN = re.compile(r"::λ\[")
_NAMESPACES = re.compile(r"\b(?:[A-Za-z_]\w*::)+")
_SPACES = re.compile(r"\s*,\s*")


def compact(name: str) -> str:
    """A demangled C++ kernel name without what every such name repeats: ``void``, the parameter list,
    namespaces, ``operator()() const`` and lambda numbering (a lambda's argument types stay, in ``[]``).

    ``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul>
    >(int, ...)`` -> ``vectorized_elementwise_kernel<4,FillFunctor<float>,array<char*,1ul>>``. Names that are
    not C++ (``nvjet_…``, Triton and XLA names) come back unchanged."""
    if "::" not in name and "(" not in name and not name.startswith("void "):
        return name
    n = kernel_head(name)
    n = _OPERATOR.sub("", n)
    n = _LAMBDA.sub(lambda m: f"λ[{m.group(1)}]", n)
    n = _PARAMS.sub("", n)
    n = _EMPTY_LAMBDA.sub("", n)
    n = _LAMBDA_JOIN.sub("λ[", n)
    n = _NAMESPACES.sub("", n)
    n = _SPACES.sub(",", n).replace(" >", ">")
    return n or name


def _around(s: str, at: int, width: int) -> str:
    """``s`` in ``width`` characters showing its start and the part from just before ``at`` (where it differs
    from names it would otherwise read like)."""
    if len(s) <= width:
        return s
    head = max(1, width // 3)
    rest = width - head - 1
    start = max(head, min(at - 2, len(s) - rest))
    if start <= head:
        return shorten_middle(s, width)
    window = s[start:start + rest]
    if start + rest < len(s):
        window = window[:-1] + "…"
    return s[:head] + "…" + window


def distinct_names(names: Sequence[str], width: int, compacted: Sequence[str] | None = None) -> list[str]:
    """Each name compacted (:func:`compact`; ``compacted`` when the caller has them) and fitted in ``width``
    characters; names that are different but would read the same show where they differ instead of their
    common middle; what still collides gets a ``#k`` suffix."""
    full = list(compacted) if compacted is not None else [compact(n) for n in names]
    shown = [shorten_middle(f, width) for f in full]
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(shown):
        groups.setdefault(s, []).append(i)
    for idx in groups.values():
        sources = {names[i] for i in idx}
        if len(sources) < 2:
            continue
        texts = [full[i] for i in idx]
        common = 0
        shortest = min(len(t) for t in texts)
        while common < shortest and len({t[common] for t in texts}) == 1:
            common += 1
        for i in idx:
            shown[i] = _around(full[i], common, width)
    seen: dict[str, dict[str, int]] = {}
    for i, s in enumerate(shown):  # still the same text for different names: number them
        by_source = seen.setdefault(s, {})
        by_source.setdefault(names[i], len(by_source))
    for i, s in enumerate(shown):
        if len(seen[s]) > 1:
            k = seen[s][names[i]]
            tag = f"#{k + 1}"
            shown[i] = shorten_middle(s.rstrip("…"), max(1, width - len(tag))) + tag
    return shown
