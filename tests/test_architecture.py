"""The layers import one way: model <- load <- link <- pipeline <- analyze <- render <- cli.

Every ``import`` in kernscope (module level or inside a function) is checked against the layer table,
so a lower layer reaching up (the way cycles start) fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "kernscope"

#: (module prefix, layer). The longest matching prefix decides; higher layers may import lower ones.
LAYERS: list[tuple[str, int]] = [
    ("kernscope.version", 0),
    ("kernscope.errors", 0),
    ("kernscope.model", 0),
    ("kernscope.intervals", 0),
    ("kernscope.files", 0),
    ("kernscope.scalars", 0),
    ("kernscope.testing", 0),
    ("kernscope.testing.fuzz", 7),  # drives the whole pipeline
    ("kernscope.load", 1),
    ("kernscope.link", 2),
    ("kernscope.pipeline", 3),
    ("kernscope.analyze", 4),
    ("kernscope.intra", 4),  # its device/host/decode/stats are analyses of kernel buffers
    ("kernscope.engine", 5),
    ("kernscope.bench", 5),
    ("kernscope.render", 6),
    ("kernscope.compat", 7),
    ("kernscope.cli", 7),
    ("kernscope.bench.cli", 7),
    ("kernscope.intra.cli", 7),
    ("kernscope.__main__", 7),
    ("kernscope", 7),  # the package front (kernscope/__init__.py) re-exports the API
]


def layer(module: str) -> int:
    best = max((p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every kernscope import in a file, function-level ones included."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("kernscope")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("kernscope"):
                continue
            # "from . import x" / "from .pkg import mod": the names may be submodules
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((node.lineno, sub if (PKG.parent / (sub.replace(".", "/") + ".py")).exists()
                            or (PKG.parent / sub.replace(".", "/")).is_dir() else target))
    return out


FILES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_import_reaches_a_higher_layer(path):
    mod = module_name(path)
    mine = layer(mod)
    bad = [f"line {ln}: {mod} (layer {mine}) imports {t} (layer {layer(t)})"
           for ln, t in imports(path) if layer(t) > mine and not t == mod]
    assert not bad, "\n".join(bad)


def test_every_module_has_a_layer():
    for p in FILES:
        layer(module_name(p))


def test_intra_device_code_takes_offsets_from_layout():
    """Pointer arithmetic on the profiler buffer uses layout.py's names, never literal offsets."""
    src = (PKG / "intra" / "device.py").read_text()
    literal = re.findall(r"\b(?:buf|base|profiler_buffer)\s*\+\s*\d", src)
    assert not literal, literal
    from kernscope.intra import layout

    for name, value in re.findall(r"^_(\w+): tl\.constexpr = tl\.constexpr\(L\.(\w+)\)", src, flags=re.M):
        assert hasattr(layout, value), name


def test_no_print_in_library_code():
    offenders = []
    for p in FILES:
        if p.name in ("cli.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{p.relative_to(PKG)}:{node.lineno}")
    assert not offenders, offenders


def test_src_layout_imports_the_installed_package_from_the_checkout(tmp_path):
    """#30: a script run in the checkout's root imports the package from src/ (the installed one), never a
    top-level ``kernscope/`` folder by accident."""
    import subprocess
    import sys

    root = PKG.parents[1]
    assert PKG == root / "src" / "kernscope" and not (root / "kernscope").exists()
    script = tmp_path / "probe.py"
    script.write_text("import kernscope, pathlib; print(pathlib.Path(kernscope.__file__).resolve())")
    out = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(out) == PKG / "__init__.py"
