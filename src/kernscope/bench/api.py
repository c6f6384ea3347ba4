"""Operator API: an operator declares inputs and implementations; registries are plain objects.

Example::

    registry = OperatorRegistry()

    @registry.operator
    class VectorAdd(Operator):
        name = "vector_add"
        x_label = ("Size",)

        def inputs(self):
            for p in range(12, 28, 2):
                n = 2 ** p
                yield Input((n,), (torch.randn(n, device=self.device), torch.randn(n, device=self.device)))

        @impl(baseline=True)
        def torch_add(self, x, y):
            return lambda: x + y

        def bytes(self, inp):  # for gbps
            return 3 * inp.args[0].numel() * inp.args[0].element_size()

An implementation returns a zero-argument callable that runs the operation once.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import KernscopeError

MODES = ("fwd", "bwd", "fwd_bwd")


@dataclass
class Input:
    """One benchmark input: its x-label values (e.g. ``(4, 48, 1024, 64)``), arguments, extra info."""

    x: tuple[Any, ...]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        return "(" + ", ".join(str(v) for v in self.x) + ")" if len(self.x) != 1 else str(self.x[0])


@dataclass(frozen=True)
class ImplSpec:
    """A registered implementation (a method of the operator class)."""

    name: str
    method: str
    baseline: bool = False
    needs_cuda: bool = False
    modes: tuple[str, ...] = MODES
    dtypes: tuple[str, ...] | None = None
    doc: str = ""
    #: other names that select it (TritonBench's: ``cudnn`` for ``sdpa_cudnn``); results carry the name typed
    aliases: tuple[str, ...] = ()
    #: Python modules it imports, any one of which will do (``flash_attn_interface``); none importable: skipped
    modules: tuple[str, ...] = ()
    #: the implementation to suggest when the modules are missing
    nearest: str | None = None


def impl(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    baseline: bool = False,
    needs_cuda: bool = False,
    modes: Sequence[str] = MODES,
    dtypes: Sequence[str] | None = None,
    aliases: Sequence[str] = (),
    modules: Sequence[str] = (),
    nearest: str | None = None,
) -> Any:
    """Mark an operator method as an implementation. ``baseline=True`` on exactly one of them. ``aliases``: other
    names that select it; ``modules``: packages it needs (any one of them), else it is skipped with a line naming
    them and ``nearest``."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__kernscope_impl__ = ImplSpec(  # type: ignore[attr-defined]
            name or f.__name__, f.__name__, baseline, needs_cuda, tuple(modes), tuple(dtypes) if dtypes else None,
            (inspect.getdoc(f) or "").split("\n")[0], tuple(aliases), tuple(modules), nearest,
        )
        return f

    return mark(fn) if fn is not None else mark


class Operator:
    """Base class. Subclasses set ``name`` and ``x_label`` and implement :meth:`inputs`."""

    name: str = ""
    x_label: tuple[str, ...] = ("Input",)
    default_dtype: str = "float16"
    #: relative/absolute tolerances for the accuracy check, per dtype
    tolerances: dict[str, tuple[float, float]] = {
        "float32": (1e-4, 1e-5),
        "float16": (1e-2, 1e-2),
        "bfloat16": (2e-2, 2e-2),
        "float8_e4m3fn": (1e-1, 1e-1),
    }

    def __init__(self, device: str = "cuda", dtype: str | None = None, mode: str = "fwd") -> None:
        if mode not in MODES:
            raise KernscopeError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        self.device = device
        self.dtype_name = dtype or self.default_dtype
        self.mode = mode

    # -- to override --------------------------------------------------------------------------
    def inputs(self) -> Iterator[Input]:  # pragma: no cover - abstract
        raise NotImplementedError

    def flops(self, inp: Input) -> float | None:
        """Floating-point operations of one call in this operator's ``mode`` (for tflops), or None.

        Use the perf model's closed forms (:mod:`kernscope.analyze.perf.formulas`) so the harness and
        ``kernscope perf`` count the same work."""
        return None

    def bytes(self, inp: Input) -> float | None:
        """Bytes moved by one call (for gbps), or None."""
        return None

    # -- helpers ------------------------------------------------------------------------------
    @property
    def dtype(self) -> Any:
        import torch

        try:
            return getattr(torch, self.dtype_name)
        except AttributeError:
            raise KernscopeError(f"unknown dtype {self.dtype_name!r}") from None

    @classmethod
    def impls(cls) -> list[ImplSpec]:
        out = []
        for klass in reversed(cls.__mro__):
            for v in vars(klass).values():
                spec = getattr(v, "__kernscope_impl__", None)
                if spec is not None and spec not in out:
                    out.append(spec)
        return out

    @classmethod
    def baseline(cls) -> ImplSpec | None:
        b = [s for s in cls.impls() if s.baseline]
        return b[0] if b else None

    def make(self, spec: ImplSpec, inp: Input) -> Callable[[], Any]:
        fn = getattr(self, spec.method)(*inp.args, **inp.kwargs)
        if not callable(fn):
            raise KernscopeError(f"{self.name}.{spec.name} must return a zero-argument callable")
        return fn


class OperatorRegistry:
    """Operators by name. An object, not a module global keyed by module names."""

    def __init__(self) -> None:
        self._ops: dict[str, type[Operator]] = {}

    def operator(self, cls: type[Operator]) -> type[Operator]:
        """Class decorator: register ``cls`` under ``cls.name``."""
        if not cls.name:
            raise KernscopeError(f"operator class {cls.__name__} has no name")
        baselines = [s for s in cls.impls() if s.baseline]
        if len(baselines) > 1:
            raise KernscopeError(f"operator {cls.name}: more than one baseline ({', '.join(s.name for s in baselines)})")
        self._ops[cls.name] = cls
        return cls

    def get(self, name: str) -> type[Operator]:
        try:
            return self._ops[name]
        except KeyError:
            raise KernscopeError(f"unknown operator {name!r}; available: {', '.join(sorted(self._ops)) or 'none'}") from None

    def names(self) -> list[str]:
        return sorted(self._ops)

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def load_module(self, path: str) -> None:
        """Import a user module (file path or dotted name); its Operator subclasses are registered."""
        if os.path.exists(path):
            mod_name = f"kernscope_user_ops_{abs(hash(os.path.abspath(path)))}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            if spec is None or spec.loader is None:
                raise KernscopeError(f"{path}: cannot import")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = mod
            try:
                spec.loader.exec_module(mod)
            except Exception as e:  # user code: report it as one line
                raise KernscopeError(f"{path}: failed to import ({type(e).__name__}: {e})") from None
        else:
            try:
                mod = importlib.import_module(path)
            except ImportError as e:
                raise KernscopeError(f"{path}: cannot import module ({e})") from None
        for v in vars(mod).values():
            if inspect.isclass(v) and issubclass(v, Operator) and v is not Operator and v.name and v.name not in self._ops:
                self.operator(v)
