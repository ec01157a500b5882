#!/usr/bin/env python3
"""The S3 tables of docs/S3-PROXY.md from bench/s3-proxy.sh's merged sweeps.

    python3 bench/s3_table.py RESULTS_DIR WORKLOAD

Per thread count, over the point's runs (repeats): the median and range of
events/s and of p95, the server's CPU (MariaDB direct, the proxy's JVM
through it; mean of the run's samples, in percent of one core), the
clients' CPU per event from their rusage (both added), and the load
average sampled beside the runs.
"""
import json
import statistics
import sys
from pathlib import Path


def runs_figures(point):
    figures = []
    for run in point["runs"]:
        s = run["summary"]
        # A merged run keeps each shard's resource samples; both sampled
        # the same server process.
        samples = [x for shard in run["merge"]["shards"] for x in shard["resources"]["samples"]]
        cpu = [x["server_cpu_pct"] for x in samples if "server_cpu_pct" in x]
        cpu_s = s["client_cpu"]["user_s"] + s["client_cpu"]["sys_s"]
        figures.append({
            "eps": s["events_per_sec"],
            "p95": s["latency_ms"]["p95"],
            "server_cpu": statistics.mean(cpu) if cpu else float("nan"),
            "client_us": 1e6 * cpu_s / s["events"] if s["events"] else float("nan"),
            "load": [x["load_1m"] for x in samples],
        })
    return figures


def med_range(values, fmt):
    lo, hi = min(values), max(values)
    return f"{fmt(statistics.median(values))} ({fmt(lo)}–{fmt(hi)})"


def main():
    out, workload = Path(sys.argv[1]), sys.argv[2]
    modes = {m: json.loads((out / f"{workload}-{m}.json").read_text()) for m in ("direct", "proxy")}
    print(f"| threads | direct ev/s | p95 ms | MariaDB CPU % | proxy ev/s | p95 ms | proxy CPU % "
          f"| proxy / direct | client CPU µs/ev (direct / proxy) | load 1m (direct / proxy) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    thousands = lambda v: f"{v:,.0f}"
    one = lambda v: f"{v:.1f}"
    for d, p in zip(modes["direct"]["points"], modes["proxy"]["points"]):
        fd, fp = runs_figures(d), runs_figures(p)
        ratio = statistics.median(f["eps"] for f in fp) / statistics.median(f["eps"] for f in fd)
        load = lambda fs: f"{min(min(f['load']) for f in fs):.0f}–{max(max(f['load']) for f in fs):.0f}"
        cpu = lambda fs: f"{statistics.median(f['client_us'] for f in fs):.0f}"
        print(f"| {d['value']:.0f} | {med_range([f['eps'] for f in fd], thousands)} "
              f"| {med_range([f['p95'] for f in fd], one)} | {statistics.median(f['server_cpu'] for f in fd):.0f} "
              f"| {med_range([f['eps'] for f in fp], thousands)} | {med_range([f['p95'] for f in fp], one)} "
              f"| {statistics.median(f['server_cpu'] for f in fp):.0f} | {ratio:.2f}x "
              f"| {cpu(fd)} / {cpu(fp)} | {load(fd)} / {load(fp)} |")
    for m, sweep in modes.items():
        for finding in sweep["findings"]:
            print(f"- {m}: {finding}")


if __name__ == "__main__":
    main()
