#!/usr/bin/env python3
"""loadcell ts-ingest vs influxdata's inch on one InfluxDB 1.x. Driven by
bench/ts.sh:

    ts_bench.py --outdir DIR --loadcell BIN --inch BIN --url URL --server-pid PID \
                --tags 100,100 --points P --interval 10s --batches 500,5000 \
                --workers 1,2,4 --reps N

Both write the same points into the same database (`bench`, dropped before
every run): measurement m0, tags tag0 and tag1 of 7-character values (inch's
`value0`..`value99`; loadcell's fixed-length strings), one float field
`field0` (inch `-field-prefix field0 -randomize-fields`: 0..9999; loadcell
0..100 with two decimals), P points per series 10 s apart in a fixed past
window (inch `-start-time -time`, loadcell `--start --end`), so each run
writes series × P points and ends by itself. Same batch size (inch `-b`,
loadcell `--points-per-request`) and workers (inch `-c`, loadcell
`--threads`). Tools alternate, the first one rotating per rep.

Each run records the tool's own points/s (inch's last `-v` line, loadcell's
`summary.items_per_sec`), the points InfluxDB counts afterwards over the
process's wall time, client CPU from the child's rusage (bench/measure.py)
per counted point, and the server's CPU over the run.

DIR/runs.jsonl has every run with its exact command; DIR/table.md the medians.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402
from sql_bench import log, server_cpu_s  # noqa: E402

DB = "bench"
MEASUREMENT = "m0"
FIELD = "field0"
# inch's tag values are `value0`..`value99`: loadcell's are this long.
TAG_LENGTH = 7


def influx_query(url: str, q: str) -> dict:
    data = urllib.parse.urlencode({"q": q, "db": DB}).encode()
    with urllib.request.urlopen(f"{url}/query", data=data, timeout=300) as r:
        return json.load(r)


def first_value(answer: dict) -> int:
    """The first value of the first row of a query's answer (0 when empty)."""
    series = answer["results"][0].get("series")
    return int(series[0]["values"][0][-1]) if series else 0


def stored(url: str) -> tuple[int, int]:
    """(points of field0, series) that InfluxDB holds in `bench`."""
    points = first_value(influx_query(url, f"SELECT count({FIELD}) FROM {MEASUREMENT}"))
    series = first_value(influx_query(url, f"SHOW SERIES EXACT CARDINALITY FROM {MEASUREMENT}"))
    return points, series


def drop(url: str) -> None:
    influx_query(url, f"DROP DATABASE {DB}")


def inch_rate(stdout: str) -> float:
    """inch's own figure: the `Total throughput: N pt/sec` of its last -v line."""
    rates = re.findall(r"Total throughput: ([0-9.]+) pt/sec", stdout)
    return float(rates[-1]) if rates else math.nan


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--outdir", type=Path, required=True)
    for opt in ("loadcell", "inch", "url"):
        p.add_argument(f"--{opt}", required=True)
    p.add_argument("--server-pid", type=int, required=True)
    p.add_argument("--tags", default="100,100", help="inch's -t: tag cardinalities")
    p.add_argument("--points", type=int, default=500, help="points per series")
    p.add_argument("--interval-s", type=int, default=10)
    p.add_argument("--batches", default="500,5000")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    cardinalities = [int(c) for c in a.tags.split(",")]
    series = math.prod(cardinalities)
    total = series * a.points
    # A fixed past window, aligned to the interval (loadcell rounds --start down).
    now = int(datetime.now(timezone.utc).timestamp())
    start_s = now - 7200 - now % a.interval_s
    start = datetime.fromtimestamp(start_s, timezone.utc)
    span = timedelta(seconds=a.points * a.interval_s)
    iso = "%Y-%m-%dT%H:%M:%SZ"
    host = a.url.split("//", 1)[1]
    rows: list[dict] = []

    def loadcell(verb: str, *rest: str) -> list[str]:
        return [a.loadcell, verb, "ts-ingest", "--target", f"influx://{host}/{DB}",
                "--measurement", MEASUREMENT, *rest]

    def run(tool: str, batch: int, workers: int, rep: int) -> None:
        drop(a.url)
        tag = f"{tool}-b{batch}-c{workers}-{rep}"
        if tool == "loadcell":
            prep = measure(loadcell("prepare"))
            if prep.returncode != 0:
                raise RuntimeError(f"loadcell prepare failed: {prep.stderr[-2000:]}")
            out = a.outdir / f"{tag}.json"
            cmd = loadcell("run", "--tags", str(len(cardinalities)), "--fields", "1",
                           "--tag-length", str(TAG_LENGTH), "--series", str(series),
                           "--points-per-request", str(batch), "--threads", str(workers),
                           "--interval", f"{a.interval_s}s", "--start", start.strftime(iso),
                           "--end", (start + span).strftime(iso), "--out", str(out))
        else:
            cmd = [a.inch, "-host", a.url, "-db", DB, "-t", a.tags, "-p", str(a.points),
                   "-f", "1", "-field-prefix", FIELD, "-randomize-fields",
                   "-b", str(batch), "-c", str(workers),
                   "-start-time", start.strftime(iso), "-time", f"{span.total_seconds():.0f}s",
                   "-v"]
        log(f"{tag}: {' '.join(cmd)}")
        server0 = server_cpu_s(a.server_pid)
        m = measure(cmd, timeout=1800)
        server = server_cpu_s(a.server_pid) - server0
        (a.outdir / f"{tag}.out").write_text(m.stdout + m.stderr)
        if m.returncode != 0:
            raise RuntimeError(f"{tag} failed ({m.returncode}): {m.stderr[-3000:]}{m.stdout[-2000:]}")
        points, stored_series = stored(a.url)
        row = {"tool": tool, "batch": batch, "workers": workers, "rep": rep, "cmd": cmd,
               "wall_s": m.wall_s, "client_cpu_s": m.cpu_s,
               "server_cpu_s": server, "points_sent": total, "points_stored": points,
               "series_stored": stored_series,
               "counted_rate": points / m.wall_s,
               "cpu_us_per_point": m.cpu_s * 1e6 / max(points, 1)}
        if tool == "loadcell":
            r = json.loads(out.read_text())
            s = r["summary"]
            row.update(rate=s["items_per_sec"], errors=s["errors"],
                       measured_cpu_us_per_point=(s["client_cpu"]["user_s"] + s["client_cpu"]["sys_s"])
                       * 1e6 / max(s["items"], 1),
                       verification_ok=r["verification"]["ok"])
            cleanup = measure(loadcell("cleanup"))
            if cleanup.returncode != 0:
                raise RuntimeError(f"loadcell cleanup failed: {cleanup.stderr[-2000:]}")
        else:
            row.update(rate=inch_rate(m.stdout))
        rows.append(row)
        with open(a.outdir / "runs.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        short = "" if points == total else f", SHORT {total - points} points"
        log(f"  {tool}: {row['rate']:.0f} points/s (own), {row['counted_rate']:.0f} counted/wall, "
            f"{row['cpu_us_per_point']:.3f} us CPU/point, server {server:.1f} s{short}")

    configs = [(int(b), int(w)) for b in a.batches.split(",") for w in a.workers.split(",")]
    for batch, workers in configs:
        for rep in range(a.reps):
            tools = ["loadcell", "inch"][rep % 2:] + ["loadcell", "inch"][:rep % 2]
            for tool in tools:
                run(tool, batch, workers, rep)
    drop(a.url)

    def med(rs: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    lines = [f"{series} series × {a.points} points = {total} points a run; medians of {a.reps} runs", "",
             "| batch | workers | tool | points/s (own) | points/s (counted ÷ wall) | client CPU µs/point "
             "| loadcell measured phase µs/point | server CPU s | stored / sent |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for batch, workers in configs:
        by = {t: [r for r in rows if (r["tool"], r["batch"], r["workers"]) == (t, batch, workers)]
              for t in ("loadcell", "inch")}
        for tool, rs in by.items():
            phase = f"{med(rs, 'measured_cpu_us_per_point'):.3f}" if tool == "loadcell" else ""
            stored_ok = sum(r["points_stored"] == r["points_sent"] for r in rs)
            lines.append(f"| {batch} | {workers} | {tool} | {med(rs, 'rate'):,.0f} | "
                         f"{med(rs, 'counted_rate'):,.0f} | {med(rs, 'cpu_us_per_point'):.3f} | {phase} | "
                         f"{med(rs, 'server_cpu_s'):.1f} | {stored_ok}/{len(rs)} runs complete |")
        lc, inch = by["loadcell"], by["inch"]
        lines.append(f"| {batch} | {workers} | loadcell / inch | {med(lc, 'rate') / med(inch, 'rate'):.2f} | "
                     f"{med(lc, 'counted_rate') / med(inch, 'counted_rate'):.2f} | "
                     f"{med(lc, 'cpu_us_per_point') / med(inch, 'cpu_us_per_point'):.2f} | | "
                     f"{med(lc, 'server_cpu_s') / med(inch, 'server_cpu_s'):.2f} | |")
    (a.outdir / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
