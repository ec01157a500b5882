#!/usr/bin/env python3
"""Issue 39 item 7: does a shaped schedule (`--stages`) cost more client CPU
per event than a fixed `--rate` at the same mean rate?

    stages_cost.py --loadcell BIN --redis-port P --redis-pid PID --outdir DIR [--rounds 5]

Against one redis-server, `loadcell run kv --clients 8` (one thread, one
worker) runs each case's three variants, alternating, the order rotating
every round (ABC, BCA, CAB, ...):

  A  --rate R --time T                    the fixed schedule
  B  --stages '0s:R,T:R'                  the same flat schedule, through the shaped path
  C  a ramp whose mean is R               (e.g. '20s:40000': 0 -> 40,000/s, mean 20,000/s)

Client CPU is the loadcell process's user + sys from rusage (bench/measure.py),
per event sent; the server's CPU over the same window too. Every run goes to
DIR/runs.jsonl; DIR/table.md has the medians and the B/A and C/A ratios
(taken within a round, then the median and range over the rounds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402
from sql_bench import loadavg, log, server_cpu_s  # noqa: E402

# name, arrival, extra args, {variant: schedule args}
CASES = [
    ("20k uniform", "uniform", [], {
        "A": ["--rate", "20000", "--time", "20s"],
        "B": ["--stages", "0s:20000,20s:20000"],
        "C": ["--stages", "20s:40000"]}),
    ("20k poisson", "poisson", [], {
        "A": ["--rate", "20000", "--time", "20s"],
        "B": ["--stages", "0s:20000,20s:20000"],
        "C": ["--stages", "20s:40000"]}),
    ("20k uniform, --rate-tick 1ms", "uniform", ["--rate-tick", "1ms"], {
        "A": ["--rate", "20000", "--time", "10s"],
        "B": ["--stages", "0s:20000,10s:20000"],
        "C": ["--stages", "10s:40000"]}),
    ("60k uniform", "uniform", [], {
        "A": ["--rate", "60000", "--time", "10s"],
        "B": ["--stages", "0s:60000,10s:60000"],
        "C": ["--stages", "0s:30000,10s:90000"]}),
]


def run_one(a, case, variant: str, rnd: int) -> dict:
    name, arrival, extra, variants = case
    slug = name.replace(" ", "").replace(",", "-").replace("--", "")
    out = a.outdir / "raw" / f"{slug}-{variant}-{rnd}.json"
    cmd = [a.loadcell, "run", "kv", "--target", f"redis://127.0.0.1:{a.redis_port}",
           "--clients", "8", "--arrival", arrival, *variants[variant], *extra,
           "--no-history", "--out", str(out)]
    load = loadavg()
    s0 = server_cpu_s(a.redis_pid)
    m = measure(cmd, timeout=120)
    server_s = server_cpu_s(a.redis_pid) - s0
    if m.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({m.returncode}): {m.stderr[-800:]}")
    d = json.loads(out.read_text())
    s = d["summary"]
    sch = s.get("schedule", {})
    run = {"case": name, "variant": variant, "round": rnd, "cmd": " ".join(cmd),
           "loadavg_before": load, "wall_s": m.wall_s, "user_s": m.user_s, "sys_s": m.sys_s,
           "client_cpu_s": m.cpu_s, "server_cpu_s": server_s,
           "events": s["events"], "duration_s": s["duration_s"],
           "events_per_sec": s["events_per_sec"], "target_rate": sch.get("target_rate"),
           "late": sch.get("late"), "dropped": sch.get("dropped"),
           "lag_p99_ms": (sch.get("lag_ms") or {}).get("p99"),
           "p99_ms": s["latency_ms"]["p99"], "errors": s["errors"],
           "warnings": d.get("warnings", []),
           "cpu_us_per_event": 1e6 * m.cpu_s / s["events"]}
    log(f"{name} {variant} #{rnd}: {run['events']} events, {run['events_per_sec']:,.0f}/s, "
        f"{run['cpu_us_per_event']:.2f} µs CPU/event (user {m.user_s:.2f} sys {m.sys_s:.2f}), "
        f"dropped {run['dropped']}, load {load[0]}, warnings {len(run['warnings'])}")
    return run


def rng(xs) -> str:
    return f"{min(xs):.2f}–{max(xs):.2f}"


def table(runs: list[dict]) -> str:
    lines = ["| case | variant | runs | events sent, median | achieved /s, median | "
             "client CPU µs/event, median (range) | user / sys s, median | ÷ A per round, median (range) "
             "| never sent (max) | runs warned saturated |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, _, _, variants in CASES:
        by = {v: sorted((r for r in runs if r["case"] == name and r["variant"] == v),
                        key=lambda r: r["round"]) for v in variants}
        if not by["A"]:
            continue
        a_of = {r["round"]: r["cpu_us_per_event"] for r in by["A"]}
        for v, rs in by.items():
            if not rs:
                continue
            cpu = [r["cpu_us_per_event"] for r in rs]
            ratio = ""
            if v != "A":
                q = [r["cpu_us_per_event"] / a_of[r["round"]] for r in rs if r["round"] in a_of]
                ratio = f"{statistics.median(q):.3f} ({rng(q)})"
            sat = sum(1 for r in rs if any("saturated" in w for w in r["warnings"]))
            lines.append(
                f"| {name} | {v} `{' '.join(CASES_ARGS(name, v))}` | {len(rs)} "
                f"| {statistics.median(r['events'] for r in rs):,.0f} "
                f"| {statistics.median(r['events_per_sec'] for r in rs):,.0f} "
                f"| {statistics.median(cpu):.2f} ({rng(cpu)}) "
                f"| {statistics.median(r['user_s'] for r in rs):.2f} / "
                f"{statistics.median(r['sys_s'] for r in rs):.2f} "
                f"| {ratio} | {max(r['dropped'] or 0 for r in rs)} | {sat} |")
    return "\n".join(lines) + "\n"


def CASES_ARGS(name: str, v: str) -> list[str]:
    for n, _, _, variants in CASES:
        if n == name:
            return variants[v]
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outdir", type=Path, required=True)
    ap.add_argument("--loadcell", required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--redis-pid", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--table-only", action="store_true", help="re-read DIR/runs.jsonl")
    a = ap.parse_args()
    (a.outdir / "raw").mkdir(parents=True, exist_ok=True)
    jpath = a.outdir / "runs.jsonl"
    if a.table_only:
        runs = [json.loads(x) for x in jpath.read_text().splitlines() if x.strip()]
    else:
        runs = []
        with jpath.open("a") as jl:
            for rnd in range(a.rounds):
                for case in CASES:
                    order = ["A", "B", "C"]
                    order = order[rnd % 3:] + order[:rnd % 3]
                    for v in order:
                        run = run_one(a, case, v, rnd)
                        runs.append(run)
                        jl.write(json.dumps(run) + "\n")
                        jl.flush()
                        time.sleep(1)
    text = table(runs)
    (a.outdir / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
