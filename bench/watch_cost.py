#!/usr/bin/env python3
"""Issue 42 item 4: what does `--watch` cost a run, and does a dead watcher
change its load?

    watch_cost.py --loadcell BIN --redis-port P --outdir DIR [--rounds 5]

Against one redis-server, `loadcell run kv --clients 8 --rate 20000 --rate-tick 1ms
--time 20s` (the tick keeps workers from spinning for due times, which would
swamp the figure measured; see "A shaped schedule's cost")
runs three variants per case, alternating, the order rotating every round:

  A  no --watch
  B  --watch to a live `loadcell watch` (its own CPU measured too)
  C  --watch to a closed port (a dead watcher)

Cases: the default 1 s interval, and --report-interval 100ms and 10ms (ten
and a hundred reports a second, so that the per-report cost stands out of
the noise). Per thread too: the collector's (the main thread, which encodes
each report) and the feed's sender (`loadcell-watch`). Client CPU is
the loadcell process's user + sys from rusage (bench/measure.py). The cost per
report is (B - A) client CPU seconds over the reports B sent, per round.
Every run goes to DIR/runs.jsonl; DIR/table.md has the medians.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure, run_log  # noqa: E402
from sql_bench import log  # noqa: E402

CASES = [("1s intervals", []), ("100ms intervals", ["--report-interval", "100ms"]),
         ("10ms intervals", ["--report-interval", "10ms"])]
RATE, TIME_S = 20000, 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(a, case, variant: str, rnd: int) -> dict:
    name, extra = case
    slug = name.split()[0]
    out = a.outdir / "raw" / f"{slug}-{variant}-{rnd}.json"
    watcher = None
    watch_args: list[str] = []
    if variant == "B":
        port = free_port()
        box: dict = {}
        wcmd = [a.loadcell, "watch", "--listen", f"127.0.0.1:{port}", "--json"]
        watcher = threading.Thread(target=lambda: box.update(m=measure(wcmd, timeout=120)))
        watcher.start()
        time.sleep(0.5)
        watch_args = ["--watch", f"http://127.0.0.1:{port}"]
    elif variant == "C":
        watch_args = ["--watch", f"http://127.0.0.1:{free_port()}"]
    cmd = [a.loadcell, "run", "kv", "--target", f"redis://127.0.0.1:{a.redis_port}",
           "--clients", "8", "--rate", str(RATE), "--rate-tick", "1ms", "--time", f"{TIME_S}s", *extra, *watch_args,
           "--no-history", "--out", str(out)]
    m = measure(cmd, timeout=120, threads=True)
    if m.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({m.returncode}): {m.stderr[-800:]}")
    d = json.loads(out.read_text())
    s = d["summary"]
    row = {"case": name, "variant": variant, "round": rnd, "cmd": " ".join(cmd),
           "wall_s": m.wall_s, "client_cpu_s": m.cpu_s, "events": s["events"],
           "events_per_sec": s["events_per_sec"], "p99_ms": s["latency_ms"]["p99"],
           "dropped": s["schedule"]["dropped"], "intervals": len(d["intervals"]),
           "warnings": d.get("warnings", []),
           # The collector runs on the main thread (named as the binary);
           # the feed posts from a thread of its own.
           "main_thread_cpu_s": m.thread_cpu_s.get(Path(a.loadcell).name[:15], 0.0),
           "sender_cpu_s": m.thread_cpu_s.get("loadcell-watch", 0.0)}
    if watcher is not None:
        watcher.join()
        wm = box["m"]
        summary = json.loads(wm.stdout)
        row["watcher_cpu_s"] = wm.cpu_s
        row["watched_ops"] = summary["ops"]
        row["lost_reports"] = summary["lost_reports"]
        row["reports"] = summary["shards"][0]["intervals"] + 1
    log(f"{name} {variant} #{rnd}: {row['events_per_sec']:,.0f}/s, client CPU {m.cpu_s:.2f} s, "
        f"p99 {row['p99_ms']:.3f} ms, watcher CPU {row.get('watcher_cpu_s', 0):.2f} s")
    return row


def med(xs) -> str:
    xs = list(xs)
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"


def table(runs: list[dict]) -> str:
    lines = ["| case | variant | runs | achieved /s, median | client CPU s, median (range) "
             "| p99 ms, median (range) | B−A µs per report, whole process | collector thread, B−A µs "
             "per report | sender thread µs per report | watcher CPU µs per report |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, _ in CASES:
        by = {v: sorted((r for r in runs if r["case"] == name and r["variant"] == v),
                        key=lambda r: r["round"]) for v in "ABC"}
        a_cpu = {r["round"]: r["client_cpu_s"] for r in by["A"]}
        a_main = {r["round"]: r.get("main_thread_cpu_s") for r in by["A"]}
        for v, rs in by.items():
            if not rs:
                continue
            per_report = collector = sender = watcher = ""
            if v == "B":
                q = [1e6 * (r["client_cpu_s"] - a_cpu[r["round"]]) / r["reports"]
                     for r in rs if r["round"] in a_cpu]
                per_report = med(q)
                c = [1e6 * (r["main_thread_cpu_s"] - a_main[r["round"]]) / r["reports"]
                     for r in rs if a_main.get(r["round"]) and r.get("main_thread_cpu_s")]
                collector = med(c) if c else ""
                sender = med(1e6 * r.get("sender_cpu_s", 0) / r["reports"] for r in rs)
                watcher = med(1e6 * r["watcher_cpu_s"] / r["reports"] for r in rs)
            lines.append(
                f"| {name} | {v} | {len(rs)} "
                f"| {statistics.median(r['events_per_sec'] for r in rs):,.0f} "
                f"| {med(r['client_cpu_s'] for r in rs)} | {med(r['p99_ms'] for r in rs)} "
                f"| {per_report} | {collector} | {sender} | {watcher} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outdir", type=Path, required=True)
    ap.add_argument("--loadcell", required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    (a.outdir / "raw").mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    keep = run_log(a.outdir, runs)
    for rnd in range(a.rounds):
        for case in CASES:
            order = ["A", "B", "C"]
            order = order[rnd % 3:] + order[:rnd % 3]
            for v in order:
                keep(run_one(a, case, v, rnd))
                time.sleep(1)
    text = table(runs)
    (a.outdir / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
