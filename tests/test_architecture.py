"""The layers import one way: model <- load <- link <- pipeline <- analyze <- render <- cli (each module listed).

Every ``import`` in kernscope (module level or inside a function) is checked against the layer table,
so a lower layer reaching up (the way cycles start) fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "kernscope"

#: every module's layer: higher layers may import lower ones. A module missing here fails the test (a new file is
#: placed on purpose, never by a default).
MODULES: dict[str, int] = {
    # 0: model and helpers
    "kernscope.cores": 0, "kernscope.errors": 0, "kernscope.examples": 0, "kernscope.files": 0, "kernscope.flops": 0, "kernscope.sink": 0, "kernscope.intervals": 0,
    "kernscope.model": 0, "kernscope.result": 0, "kernscope.scalars": 0, "kernscope.testing": 0, "kernscope.testing.replicate": 0,
    "kernscope.testing.synth": 0, "kernscope.version": 0,
    # 1: load
    "kernscope.load": 1, "kernscope.load.argspec": 1, "kernscope.load.cache": 1, "kernscope.load.cachedir": 1, "kernscope.load.chunk": 1,
    "kernscope.load.document": 1, "kernscope.load.fastscan": 1, "kernscope.load.fields": 1, "kernscope.load.formats": 1,
    "kernscope.load.hlo": 1, "kernscope.load.hlo_align": 1,
    "kernscope.load.hlo_work": 1, "kernscope.load.jax_json": 1, "kernscope.load.kineto": 1, "kernscope.load.lines": 1,
    "kernscope.load.native": 1, "kernscope.load.nativelib": 1, "kernscope.load.headstart": 1, "kernscope.load.gzhead": 1, "kernscope.load.scanslots": 1, "kernscope.load.opargs": 1, "kernscope.load.project": 1,
    "kernscope.load.projection": 1, "kernscope.load.protowire": 1, "kernscope.testing.xspace": 1, "kernscope.load.scan": 1,
    "kernscope.load.source": 1, "kernscope.load.strings": 1, "kernscope.load.structure": 1, "kernscope.load.xplane": 1, "kernscope.load.xplan": 1, "kernscope.load.xscan": 1, "kernscope.load.xhead": 1,
    "kernscope.load.xstats": 1,
    # 2: link
    "kernscope.link": 2, "kernscope.link.build": 2, "kernscope.link.correlation": 2, "kernscope.link.kinds": 2,
    "kernscope.link.markers": 2, "kernscope.link.ops": 2, "kernscope.link.steps": 2, "kernscope.link.tree": 2,
    "kernscope.link.unlinked": 2, "kernscope.link.captures": 2,
    # 3: pipeline
    "kernscope.oneshot": 3, "kernscope.outputs": 3, "kernscope.pipeline": 3,
    # 4: analyze, intra
    "kernscope.analyze": 4, "kernscope.analyze.annotations": 4, "kernscope.analyze.attribute": 4,
    "kernscope.analyze.bench_dir": 4, "kernscope.analyze.bench_trace": 4, "kernscope.analyze.categories": 4,
    "kernscope.analyze.critical_path": 4, "kernscope.analyze.diff": 4, "kernscope.analyze.facts": 4,
    "kernscope.analyze.findings": 4, "kernscope.analyze.idle": 4, "kernscope.analyze.kernels": 4,
    "kernscope.analyze.launcher_categories": 4, "kernscope.analyze.counters": 4, "kernscope.analyze.listing": 4, "kernscope.analyze.memory": 4, "kernscope.analyze.needs": 4,
    "kernscope.analyze.perf": 4, "kernscope.analyze.perf.devices": 4, "kernscope.analyze.perf.dtypes": 4,
    "kernscope.analyze.perf.formulas": 4, "kernscope.analyze.perf.roofline": 4, "kernscope.analyze.perf.xla": 4,
    "kernscope.analyze.ranks": 4, "kernscope.analyze.ranks.job": 4, "kernscope.analyze.ranks.summary": 4,
    "kernscope.analyze.ranks.worker": 4, "kernscope.analyze.report": 4, "kernscope.analyze.sources": 4, "kernscope.analyze.sql": 4,
    "kernscope.analyze.summary": 4,
    "kernscope.analyze.timeline": 4, "kernscope.analyze.windows": 4, "kernscope.intra": 4, "kernscope.intra.align": 4, "kernscope.intra.decode": 4,
    "kernscope.intra.device": 4, "kernscope.intra.export": 4, "kernscope.intra.hatchet": 4, "kernscope.intra.host": 4,
    "kernscope.intra.io": 4, "kernscope.intra.layout": 4, "kernscope.intra.override": 4,
    "kernscope.intra.protobuf": 4, "kernscope.intra.proton_session": 4, "kernscope.intra.rewrite": 4,
    "kernscope.intra.run": 4, "kernscope.intra.scopes": 4, "kernscope.intra.simulate": 4, "kernscope.intra.stats": 4,
    "kernscope.intra.units": 4,
    # 5: bench, engine
    "kernscope.bench": 5, "kernscope.bench.api": 5, "kernscope.bench.compare": 5, "kernscope.bench.env": 5,
    "kernscope.bench.kernels": 5, "kernscope.bench.kernels.decode_attn": 5, "kernscope.bench.kernels.flash_attn": 5,
    "kernscope.bench.kernels.matmul": 5, "kernscope.bench.kernels.more": 5, "kernscope.bench.kernels.quant": 5,
    "kernscope.bench.kernels.simple": 5, "kernscope.bench.machine": 5, "kernscope.bench.operators": 5,
    "kernscope.bench.operators.gemms": 5, "kernscope.bench.operators.llm": 5, "kernscope.bench.results": 5, "kernscope.commands": 5,
    "kernscope.bench.runner": 5, "kernscope.bench.stats": 5, "kernscope.bench.timing": 5, "kernscope.bench.traces": 5,
    "kernscope.engine": 5,
    # 6: render
    "kernscope.render": 6, "kernscope.render.bench": 6, "kernscope.render.bench_dir": 6,
    "kernscope.render.console": 6, "kernscope.render.diff": 6, "kernscope.render.excel": 6,
    "kernscope.render.frame": 6, "kernscope.render.glossary": 6, "kernscope.render.html": 6,
    "kernscope.render.html.analysis": 6, "kernscope.render.html.views": 6, "kernscope.render.intra": 6,
    "kernscope.render.intra_align": 6, "kernscope.render.counters": 6, "kernscope.render.listing": 6, "kernscope.render.intra_html": 6, "kernscope.render.memory": 6,
    "kernscope.render.names": 6, "kernscope.render.output": 6, "kernscope.render.progress": 6, "kernscope.render.report": 6, "kernscope.render.views": 6,
    "kernscope.render.formats": 6, "kernscope.render.formats.table": 6, "kernscope.render.formats.csv": 6,
    "kernscope.render.formats.html": 6, "kernscope.render.formats.json": 6, "kernscope.render.formats.xlsx": 6,
    "kernscope.render.perf": 6, "kernscope.render.perfetto": 6,
    "kernscope.render.ranks": 6, "kernscope.render.schema": 6, "kernscope.render.shortnames": 6,
    "kernscope.render.tables": 6, "kernscope.render.terminal": 6, "kernscope.render.timings": 6,
    # 7: front ends
    "kernscope": 7, "kernscope.__main__": 7, "kernscope.bench.cli": 7, "kernscope.cli": 7, "kernscope.replay": 7, "kernscope.compat": 7, "kernscope.exits": 7, "kernscope.cache_cli": 7,
    "kernscope.compat.tracelens": 7, "kernscope.intra.cli": 7, "kernscope.testing.fuzz": 7,
}


def layer(module: str) -> int:
    """A module's layer; an import of a name inside a module counts as that module."""
    while module not in MODULES and "." in module:
        module = module.rsplit(".", 1)[0]
    return MODULES[module]


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
    """#26.5: the table lists every module, and nothing that is gone: no default layer lets a new file import
    anything."""
    found = {module_name(p) for p in FILES}
    assert not found - set(MODULES), f"modules with no layer (add them to MODULES): {sorted(found - set(MODULES))}"
    assert not set(MODULES) - found, f"MODULES lists modules that no longer exist: {sorted(set(MODULES) - found)}"


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


def test_analyze_imports_no_perf_model_and_the_perf_packages_names_all_resolve():
    """``kernscope.analyze.perf`` gives its names from their modules when first used: ``analyze`` (its findings read
    the devices' table) does not import the model (~30 ms of every command's start); every name it lists resolves."""
    import subprocess
    import sys

    probe = ("import sys, kernscope.analyze.summary, kernscope.commands; "
             "print(sorted(m for m in sys.modules if m.startswith('kernscope.analyze.perf')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "['kernscope.analyze.perf', 'kernscope.analyze.perf.devices']"
    import kernscope.analyze.perf as perf

    assert all(getattr(perf, name) is not None for name in perf.__all__)
    assert perf.perf_model.__module__ == "kernscope.analyze.perf.roofline"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        perf.nope  # noqa: B018


def test_readme_layout_matches_the_tree():
    """#26: the file layout in README names no file that is gone, and names every top-level module and package."""
    readme = (PKG.parents[1] / "README.md").read_text()
    block = readme[readme.index("src/kernscope/"):readme.index("benchmarks/ ")]
    files = {p.name for p in PKG.rglob("*") if p.suffix in (".py", ".c", ".toml")}
    named = set(re.findall(r"\b([a-z_0-9]+\.(?:py|c|toml))\b", block))
    assert named and not named - files, f"README names files that are not in src/kernscope: {sorted(named - files)}"
    top = {p.name for p in PKG.iterdir() if (p.suffix == ".py" and p.name != "__init__.py" and p.name != "__main__.py")
           or (p.is_dir() and (p / "__init__.py").exists())}
    shown = {t for t in top if (t if t.endswith(".py") else f"{t}/") in block}
    assert shown == top, f"README's layout leaves out {sorted(top - shown)}"


def test_device_scripts_parse_and_build_the_library_the_package_builds():
    """The device machine's set-up (``benchmarks/device_env.sh``, which every device script sources) compiles the C
    sources that ``pyproject.toml``'s build compiles, with its flags, so that a device run measures the library users
    install; and every shell script in ``benchmarks/`` parses (``bash -n``: none of them runs in CI)."""
    import shutil
    import subprocess
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    root = PKG.parents[1]
    ext = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["ext-modules"]
    assert len(ext) == 1
    env = (root / "benchmarks" / "device_env.sh").read_text()
    built = re.findall(r"^\s*gcc ((?:-\S+ )*)(?:-I\S+ )?((?:src/kernscope/load/\S+\.c\s+(?:\\\s*)?)+)-o ", env, re.M)
    assert len(built) == 1, built
    flags, sources = built[0]
    assert sorted(sources.replace("\\", " ").split()) == sorted(ext[0]["sources"])
    assert set(ext[0]["extra-compile-args"]) <= set(flags.split())
    for script in ("gpu_session.sh", "device_jax_1g.sh", "device_jax_loader.sh", "device_cores.sh"):
        assert "source benchmarks/device_env.sh" in (root / "benchmarks" / script).read_text(), script
    bash = shutil.which("bash")
    assert bash is not None
    for sh in sorted((root / "benchmarks").glob("*.sh")):
        r = subprocess.run([bash, "-n", str(sh)], capture_output=True, text=True)
        assert r.returncode == 0, f"{sh.name}: {r.stderr}"
