"""Session 66: each class's cold `kernscope analyze` per event as well as per byte, interleaved rounds.

    python s66_per_event.py ROUNDS NAME=FILE:EVENTS ...

EVENTS: the events the file holds (a Kineto replica's count as bench_load.py built it; a JAX profile's decoded
XEvents). Each round runs every file once, cold (`--no-cache`, JSON to a file), and the bundled example (the floor).
Prints medians: wall, peak RSS, MB/s, M events/s, peak bytes per event, and the same less the floor.
"""
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


def cold(path: str) -> tuple[float, int, dict]:
    out = "/tmp/s66_pe.json"
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "kernscope", "analyze", "--no-cache", path, "--format", "json", "-o", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    assert os.waitstatus_to_exitcode(status) == 0, p.stderr.read()
    return dt, ru.ru_maxrss * 1024, json.loads(Path(out).read_text())["trace"]


def main() -> None:
    rounds = int(sys.argv[1])
    files = {}
    for spec in sys.argv[2:]:
        name, rest = spec.split("=", 1)
        path, events = rest.rsplit(":", 1)
        files[name] = (path, int(events))
    files["floor"] = (str(EXAMPLE), 0)
    got: dict[str, list[tuple[float, int]]] = {n: [] for n in files}
    facts = {}
    for r in range(rounds):
        for name, (path, _) in files.items():
            dt, rss, trace = cold(path)
            got[name].append((dt, rss))
            facts[name] = {k: trace.get(k) for k in ("events", "gpu_events", "kernels")}
            print(f"round {r} {name:6s} {dt:6.3f} s {rss / 2**20:7.1f} MiB", flush=True)
    floor_s = statistics.median(d for d, _ in got["floor"])
    floor_rss = statistics.median(m for _, m in got["floor"])
    print(f"\nfloor (bundled example, cold): {floor_s:.3f} s, {floor_rss / 2**20:.0f} MiB peak")
    print(f"{'class':6s} {'MB':>6s} {'events':>10s} {'ev/MB':>6s} {'wall s':>7s} {'MB/s':>6s} {'Mev/s':>6s} "
          f"{'Mev/s>floor':>11s} {'peak MiB':>8s} {'peak/file':>9s} {'B/event':>7s} {'B/ev>floor':>10s}")
    rows = {}
    for name, (path, events) in files.items():
        if name == "floor":
            continue
        size = os.path.getsize(path)
        wall = statistics.median(d for d, _ in got[name])
        peak = statistics.median(m for _, m in got[name])
        row = {"bytes": size, "events": events, "wall_s": wall, "peak_bytes": peak, "mb_per_s": size / 1e6 / wall,
               "mev_per_s": events / 1e6 / wall, "mev_per_s_over_floor": events / 1e6 / (wall - floor_s),
               "peak_over_file": peak / size, "peak_bytes_per_event": peak / events,
               "peak_bytes_per_event_over_floor": (peak - floor_rss) / events, "decoded": facts[name],
               "walls": [d for d, _ in got[name]], "peaks": [m for _, m in got[name]]}
        rows[name] = row
        print(f"{name:6s} {size / 1e6:6.1f} {events:10,d} {events / (size / 1e6):6.0f} {wall:7.3f} {row['mb_per_s']:6.0f} "
              f"{row['mev_per_s']:6.2f} {row['mev_per_s_over_floor']:11.2f} {peak / 2**20:8.0f} {row['peak_over_file']:9.2f} "
              f"{row['peak_bytes_per_event']:7.0f} {row['peak_bytes_per_event_over_floor']:10.0f}")
    print(json.dumps({"floor_s": floor_s, "floor_peak_bytes": floor_rss, "classes": rows}))


if __name__ == "__main__":
    main()
