"""The three manual steps of Proton's TTGIR-override tutorial, with the tutorial's record layout, on a GPU.

    python tests/data/tutorial_records_flow.py WORK_DIR [--increase-accuracy]

Step 1 dumps the TTGIR of ``proton_tutorial_add.py`` (``TRITON_KERNEL_DUMP``); step 2 inserts records the
way the tutorial's ``insert_proton_records`` script lays them out (scope ``kernel`` around the body,
``load_and_add`` from the first load to the add, ``load_<var>_issue`` around each load; our own code);
step 3 runs the program again with ``TRITON_KERNEL_OVERRIDE`` so Proton writes ``add.chrome_trace`` in
WORK_DIR. Used to record the files behind ``tests/data/proton_h100/tutorial_*``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOAD = re.compile(r"%([A-Za-z]\w*?)(?:_\d+)?\s*=\s*tt\.load\b")


def insert(text: str) -> str:
    out: list[str] = []
    open_group = False
    for line in text.splitlines(keepends=True):
        if "tt.func public @" in line and "{" in line:
            out += [line, '    proton.record start "kernel"\n']
            continue
        m = LOAD.search(line)
        if m:
            if not open_group:
                out.append('    proton.record start "load_and_add"\n')
                open_group = True
            out += [f'    proton.record start "load_{m.group(1)}_issue"\n', line,
                    f'    proton.record end "load_{m.group(1)}_issue"\n']
            continue
        if "arith.addf" in line and open_group:
            out += [line, '    proton.record end "load_and_add"\n']
            open_group = False
            continue
        if "tt.return" in line:
            out.append('    proton.record end "kernel"\n')
        out.append(line)
    return "".join(out)


def main() -> None:
    work = Path(sys.argv[1]).resolve()
    dump = work / "ttgir_dump"
    dump.mkdir(parents=True, exist_ok=True)
    prog = [sys.executable, str(HERE / "proton_tutorial_add.py"), *sys.argv[2:]]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_KERNEL_", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR"))}
    subprocess.run(prog, cwd=work, check=True, env={**base, "TRITON_ALWAYS_COMPILE": "1", "TRITON_KERNEL_DUMP": "1",
                                                    "TRITON_DUMP_DIR": str(dump)})
    for p in dump.rglob("*"):
        if p.is_file() and p.suffix != ".ttgir":
            p.unlink()
    for p in dump.rglob("*.ttgir"):
        p.write_text(insert(p.read_text()))
        print("instrumented", p)
    subprocess.run(prog, cwd=work, check=True, env={**base, "TRITON_ALWAYS_COMPILE": "1", "TRITON_KERNEL_OVERRIDE": "1",
                                                    "TRITON_OVERRIDE_DIR": str(dump)})
    print("trace:", *work.glob("*.chrome_trace"))


if __name__ == "__main__":
    main()
