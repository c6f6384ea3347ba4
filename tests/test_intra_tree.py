"""The scope tree is one row per path, whatever the row order, ties or thread count (issue #28, item 1).

Real files: Proton's TTGIR-override tutorial flow (its record layout: ``kernel`` ⊃ ``load_and_add`` ⊃
``load_x_issue``, ``load_y_issue``; 97 CTAs x 4 warps) recorded on an H100 by
``tests/data/tutorial_records_flow.py`` (default and ``--increase-accuracy``), ``benchmarks/gpu_session.sh intra3``.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from kernscope.intra.hatchet import tree_to_hatchet
from kernscope.intra.io import load_tasks
from kernscope.intra.stats import scope_tree

TUTORIAL = [Path(__file__).parent / "data" / "proton_h100" / f for f in
            ("tutorial_override.chrome_trace.gz", "tutorial_override_acc.chrome_trace.gz")]


def _tasks(rows: list[tuple[int, int, str, int, int]]) -> pl.DataFrame:
    """(block, group, name, start_ns, end_ns) rows as a task table."""
    return pl.DataFrame([{"block": b, "group": g, "sm": 0, "task_type": -1, "task": n, "start_ns": s, "end_ns": e,
                          "duration_ns": e - s} for b, g, n, s, e in rows])


@pytest.mark.parametrize("path", TUTORIAL, ids=["default", "increase_accuracy"])
def test_tutorial_override_tree_is_one_row_per_scope_with_the_files_counts(path):
    raw = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    per_name = Counter(e["name"] for e in raw)
    assert per_name == {"kernel": 388, "load_and_add": 388, "load_x_issue": 388, "load_y_issue": 388}
    tree = scope_tree(load_tasks(str(path)).tasks)
    assert tree["path"].to_list() == ["kernel", "kernel/load_and_add", "kernel/load_and_add/load_x_issue",
                                      "kernel/load_and_add/load_y_issue"]
    assert tree["depth"].to_list() == [0, 1, 2, 2]
    assert dict(zip(tree["name"], tree["count"])) == per_name
    dur: Counter = Counter()
    for e in raw:  # µs at Proton's 1 GHz: cycles
        dur[e["name"]] += round(e["dur"] * 1000)
    assert dict(zip(tree["name"], tree["total_ns"])) == pytest.approx(dict(dur), abs=388)


def test_tutorial_tree_is_the_same_at_every_polars_thread_count():
    """The report came from a 16-core machine: run the CLI with 1 and 16 polars threads, same JSON."""
    outs = []
    for threads in ("1", "16"):
        env = {**os.environ, "POLARS_MAX_THREADS": threads}
        r = subprocess.run([sys.executable, "-m", "kernscope", "intra", "stats", str(TUTORIAL[0]), "--format", "json"],
                           capture_output=True, text=True, env=env, check=True)
        outs.append(json.loads(r.stdout)["scopes"])
    assert outs[0] == outs[1] and len(outs[0]) == 4


def test_tree_is_one_row_per_path_under_ties_shuffles_and_odd_names():
    rng = random.Random(7)
    rows = []
    for block in range(6):
        for group in range(4):
            t = 100 * group
            rows += [(block, group, "kernel", t, t + 90),
                     (block, group, "load", t + 10, t + 40), (block, group, "c", t + 12, t + 20),
                     (block, group, "load.x", t + 50, t + 60),  # '.' sorts before '/': a string sort put c under it
                     (block, group, "a/b", t + 61, t + 70),  # a name with "/" is not the path kernel/a/b
                     (block, group, "a", t + 71, t + 80), (block, group, "b", t + 72, t + 78),
                     (block, group, "same", t + 81, t + 85), (block, group, "same", t + 81, t + 85)]  # identical twins
    want = None
    for _ in range(5):
        rng.shuffle(rows)
        tree = scope_tree(_tasks(rows))
        got = list(zip(tree["path"], tree["depth"], tree["count"]))
        assert tree["count"].sum() == len(rows)
        assert tree.select("path", "depth").n_unique() == tree.height  # one row per node
        want = want or got
        assert got == want  # the same tree whatever the row order
    assert want is not None
    by_key = {(p, d): n for p, d, n in want}
    assert by_key[("kernel/a/b", 2)] == 24 and by_key[("kernel/a/b", 1)] == 24  # two nodes, never merged
    assert by_key[("kernel/same", 1)] == 24 and by_key[("kernel/same/same", 2)] == 24
    names = [n for n, _ in zip(tree["name"], tree["depth"])]
    assert names.index("c") == names.index("load") + 1  # depth first: a child right under its parent
    # the hatchet nesting follows the tree, not a parse of the paths
    top = tree_to_hatchet(tree)[0]["children"][0]["children"][0]  # ROOT -> kernel frame -> scope "kernel"
    assert top["frame"]["name"] == "kernel"
    kids = {c["frame"]["name"]: c for c in top["children"]}
    assert [c["frame"]["name"] for c in kids["a"]["children"]] == ["b"] and kids["a/b"]["children"] == []
    assert [c["frame"]["name"] for c in kids["load"]["children"]] == ["c"] and kids["load.x"]["children"] == []
