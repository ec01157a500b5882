#!/usr/bin/env python3
"""New connections per second on one nginx: wrk with 'Connection: close',
ab without -k, and loadcell http-cps, each 2 threads x 25 connections (ab: 50
concurrent, its one thread); then the memory loadcell spends per idle held
connection. Driven by bench/http-cps.sh:

    http_cps.py --outdir DIR --loadcell BIN --port P --nginx-pid PID

Tools alternate (wrk, ab, loadcell, loadcell, ab, wrk, ...) so drift hits all.
Every run goes to DIR/runs.jsonl with its exact command, connections per
second, the client's CPU (rusage, via measure.py) and CPU per connection;
DIR/table.md is the summary (median of the reps). Memory per held
connection is the client's resident memory holding N connections less that
holding 10, over N - 10, both from the result files' client_rss_bytes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402
from sql_bench import log  # noqa: E402

THREADS, CONNS_PER_THREAD = 2, 25


def url(a) -> str:
    return f"http://127.0.0.1:{a.port}/index.html"


def wrk(a, out: Path):
    cmd = ["wrk", "-t", str(THREADS), "-c", str(THREADS * CONNS_PER_THREAD), "-d", f"{a.time}s",
           "-H", "Connection: close", url(a)]
    m = measure(cmd)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", m.stdout).group(1))
    errors = re.search(r"Socket errors: (.*)", m.stdout)
    return cmd, m, rps, errors.group(1) if errors else ""


def ab(a, out: Path):
    cmd = ["ab", "-q", "-c", str(THREADS * CONNS_PER_THREAD), "-t", str(a.time), "-n", "100000000",
           url(a)]
    m = measure(cmd)
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", m.stdout).group(1))
    failed = re.search(r"Failed requests:\s+(\d+)", m.stdout)
    return cmd, m, rps, f"failed {failed.group(1)}" if failed else ""


def loadcell(a, out: Path):
    cmd = [a.loadcell, "run", "http-cps", "--target", url(a), "--threads", str(THREADS),
           "--clients", str(CONNS_PER_THREAD), "--time", f"{a.time}s", "--out", str(out)]
    m = measure(cmd)
    s = json.loads(out.read_text())["summary"]
    return cmd, m, s["connects_per_sec"], f"errors {s['errors']}, failed events {s['failed_events']}"


def held_rss_kib(a, connections: int, out: Path) -> float:
    cmd = [a.loadcell, "run", "http-conns", "--target", url(a), "--connections", str(connections),
           "--ramp-rate", "5000", "--keepalive-interval", "1s", "--time", "6s", "--out", str(out)]
    m = measure(cmd)
    r = json.loads(out.read_text())
    held = r["connections"]["held_max"]
    if held != connections:
        raise SystemExit(f"held {held} of {connections}: {r['connections']}")
    rss = max(s["client_rss_bytes"] for s in r["resources"]["samples"])
    log(f"held {connections}: client RSS {rss / 1024:.0f} KiB, maxrss {m.maxrss_kb} KiB")
    return rss / 1024


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--outdir", type=Path, required=True)
    p.add_argument("--loadcell", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--nginx-pid", type=int, required=True)
    p.add_argument("--time", type=int, default=10)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--hold", type=int, default=10000)
    a = p.parse_args()

    tools = {"wrk": wrk, "ab": ab, "loadcell": loadcell}
    order = list(tools)
    rows = {name: [] for name in tools}
    with open(a.outdir / "runs.jsonl", "w") as runs:
        for rep in range(a.reps):
            for name in order if rep % 2 == 0 else reversed(order):
                out = a.outdir / f"{name}-{rep}.json"
                cmd, m, cps, notes = tools[name](a, out)
                cpu_us = m.cpu_s * 1e6 / max(cps * a.time, 1)
                row = {"tool": name, "rep": rep, "argv": cmd, "cps": cps, "cpu_s": m.cpu_s,
                       "cpu_us_per_conn": cpu_us, "wall_s": m.wall_s, "notes": notes}
                rows[name].append(row)
                runs.write(json.dumps(row) + "\n")
                log(f"{name} rep {rep}: {cps:.0f} conn/s, {cpu_us:.1f} µs CPU per connection ({notes})")

    few = held_rss_kib(a, 10, a.outdir / "hold-10.json")
    many = held_rss_kib(a, a.hold, a.outdir / f"hold-{a.hold}.json")
    per_conn = (many - few) / (a.hold - 10)

    lines = ["| tool | connections/s (median) | client CPU µs per connection | notes |",
             "|---|---:|---:|---|"]
    for name, rs in rows.items():
        cps = statistics.median(r["cps"] for r in rs)
        cpu = statistics.median(r["cpu_us_per_conn"] for r in rs)
        lines.append(f"| {name} | {cps:.0f} | {cpu:.1f} | {rs[-1]['notes']} |")
    lines.append("")
    lines.append(f"loadcell holding {a.hold} idle connections: {many:.0f} KiB resident, "
                 f"{few:.0f} KiB holding 10: {per_conn:.1f} KiB per connection")
    table = "\n".join(lines) + "\n"
    (a.outdir / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
