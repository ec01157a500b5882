#!/usr/bin/env python3
"""Key-value peers vs loadcell on the same server: redis-benchmark (and
memtier_benchmark when it is on PATH) against redis-server, memaslap against
memcached. Driven by bench/kv.sh:

    kv_bench.py --outdir DIR --loadcell BIN --redis-port P --redis-pid PID \
                --memcached-port P --memcached-pid PID

The setup is the issue's: 2 threads x 25 connections, 1:1 SET:GET, 100k keys,
32-byte values, pipeline 1 and 16 (memaslap and memcached: pipeline 1 only;
memaslap keeps one request in flight per connection). Tools alternate
(peer, loadcell, loadcell, peer, ...) so drift hits both. Every run goes to
DIR/runs.jsonl with its exact command, ops/s, latency percentiles, the
client's CPU (rusage, via measure.py) and the server's CPU over the same
window; DIR/table.md is the summary (median of the reps).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402
from sql_bench import loadavg, log, server_cpu_s  # noqa: E402

THREADS, CONNS_PER_THREAD, KEYS, VALUE = 2, 25, 100_000, 32


def loadcell_cmd(a, scheme: str, port: int, depth: int, out: Path) -> list[str]:
    return [a.loadcell, "run", "kv", "--target", f"{scheme}://127.0.0.1:{port}",
            "--threads", str(THREADS), "--clients", str(CONNS_PER_THREAD), "--ratio", "1:1",
            "--key-maximum", str(KEYS), "--data-size", str(VALUE), "--pipeline", str(depth),
            "--time", f"{a.time}s", "--out", str(out)]


def parse_loadcell(path: Path) -> dict:
    s = json.loads(path.read_text())["summary"]
    lat = s["latency_ms"]
    return {"ops": s["ops"], "ops_per_sec": s["ops_per_sec"], "p50_ms": lat["p50"],
            "p99_ms": lat["p99"], "p999_ms": lat["p999"]}


def redis_benchmark_cmd(a, depth: int) -> list[str]:
    # SET and GET run one after the other, n requests each: 1:1 overall.
    n = a.requests * (8 if depth > 1 else 1)
    return ["redis-benchmark", "-h", "127.0.0.1", "-p", str(a.redis_port), "--threads",
            str(THREADS), "-c", str(THREADS * CONNS_PER_THREAD), "-P", str(depth), "-d",
            str(VALUE), "-r", str(KEYS), "-n", str(n), "-t", "set,get", "--csv", "--precision", "3"]


def parse_redis_benchmark(text: str, cmd: list[str]) -> dict:
    n = int(cmd[cmd.index("-n") + 1])
    rows = [line.replace('"', "").split(",") for line in text.splitlines()]
    rows = [r for r in rows if r and r[0] in ("SET", "GET")]
    if len(rows) != 2:
        raise RuntimeError(f"unexpected redis-benchmark output: {text!r}")
    secs = sum(n / float(r[1]) for r in rows)
    # Per test: rps, avg, min, p50, p95, p99, max. Percentiles of the
    # union are not derivable; report the worse of the two tests.
    return {"ops": 2 * n, "ops_per_sec": 2 * n / secs,
            "p50_ms": max(float(r[4]) for r in rows), "p99_ms": max(float(r[6]) for r in rows),
            "p999_ms": None}


def memtier_cmd(a, depth: int, out: Path) -> list[str]:
    return ["memtier_benchmark", "-s", "127.0.0.1", "-p", str(a.redis_port), "-t", str(THREADS),
            "-c", str(CONNS_PER_THREAD), "--ratio", "1:1", "--key-maximum", str(KEYS), "-d",
            str(VALUE), "--pipeline", str(depth), "--test-time", str(a.time), "--hide-histogram",
            "--json-out-file", str(out)]


def parse_memtier(path: Path, secs: int) -> dict:
    totals = json.loads(path.read_text())["ALL STATS"]["Totals"]
    # Older memtier versions have neither a count nor percentiles here.
    pct = totals.get("Percentile Latencies", {})
    ops = totals.get("Count", totals["Ops/sec"] * secs)
    return {"ops": ops, "ops_per_sec": totals["Ops/sec"],
            "p50_ms": pct.get("p50.00"), "p99_ms": pct.get("p99.00"), "p999_ms": pct.get("p99.90")}


def memaslap_cmd(a, cfg: Path) -> list[str]:
    return ["memcaslap", "-s", f"127.0.0.1:{a.memcached_port}", "-T", str(THREADS), "-c",
            str(THREADS * CONNS_PER_THREAD), "-t", f"{a.time}s", "-F", str(cfg)]


def parse_memaslap(text: str) -> dict:
    m = re.search(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)", text)
    if not m:
        raise RuntimeError(f"unexpected memaslap output: {text[-500:]!r}")
    # memaslap prints no percentiles in this mode.
    return {"ops": int(m.group(2)), "ops_per_sec": float(m.group(3)), "p50_ms": None,
            "p99_ms": None, "p999_ms": None}


def run_one(a, case: dict, tool: str, rep: int) -> dict:
    slug = case["name"].replace(", ", "-p")
    out = a.outdir / "raw" / f"{slug}-{tool}-{rep}.json"
    if tool == "loadcell":
        cmd = loadcell_cmd(a, case["scheme"], case["port"], case["depth"], out)
    elif tool == "redis-benchmark":
        cmd = redis_benchmark_cmd(a, case["depth"])
    elif tool == "memtier_benchmark":
        cmd = memtier_cmd(a, case["depth"], out)
    else:
        cmd = memaslap_cmd(a, a.outdir / "memaslap.cfg")
    load = loadavg()
    server0 = server_cpu_s(case["pid"])
    m = measure(cmd, timeout=a.time * 10 + 60)
    server_s = server_cpu_s(case["pid"]) - server0
    if m.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({m.returncode}): {m.stderr[-800:]}")
    if tool == "loadcell":
        got = parse_loadcell(out)
    elif tool == "redis-benchmark":
        got = parse_redis_benchmark(m.stdout, cmd)
    elif tool == "memtier_benchmark":
        got = parse_memtier(out, a.time)
    else:
        got = parse_memaslap(m.stdout + m.stderr)
    run = {"case": case["name"], "tool": tool, "rep": rep, "cmd": " ".join(cmd),
           "wall_s": m.wall_s, "client_cpu_s": m.cpu_s, "server_cpu_s": server_s,
           "loadavg_before": load, **got,
           "client_cpu_us_per_op": 1e6 * m.cpu_s / got["ops"]}
    log(f"{case['name']} {tool} #{rep}: {got['ops_per_sec']:,.0f} ops/s, "
        f"{run['client_cpu_us_per_op']:.2f} µs CPU/op")
    return run


def fmt(x, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def table(runs: list[dict], cases: list[dict]) -> str:
    lines = ["| server, pipeline | tool | ops/s | p50 ms | p99 ms | p99.9 ms | client CPU µs/op "
             "| loadcell ops/s ÷ peer | peer CPU/op ÷ loadcell |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        med = {}
        for tool in case["tools"]:
            rs = [r for r in runs if r["case"] == case["name"] and r["tool"] == tool]
            med[tool] = {k: (statistics.median(r[k] for r in rs) if rs[0][k] is not None else None)
                         for k in ("ops_per_sec", "p50_ms", "p99_ms", "p999_ms",
                                   "client_cpu_us_per_op")}
        lc = med["loadcell"]
        for tool in case["tools"]:
            x = med[tool]
            ratio = cpu = ""
            if tool != "loadcell":
                ratio = f"{lc['ops_per_sec'] / x['ops_per_sec']:.2f}×"
                cpu = f"{x['client_cpu_us_per_op'] / lc['client_cpu_us_per_op']:.2f}×"
            lines.append(
                f"| {case['name']} | {tool} | {x['ops_per_sec']:,.0f} | {fmt(x['p50_ms'], '.3f')} "
                f"| {fmt(x['p99_ms'], '.3f')} | {fmt(x['p999_ms'], '.3f')} "
                f"| {x['client_cpu_us_per_op']:.2f} | {ratio} | {cpu} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--outdir", type=Path, required=True)
    ap.add_argument("--loadcell", required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--redis-pid", type=int, required=True)
    ap.add_argument("--memcached-port", type=int, required=True)
    ap.add_argument("--memcached-pid", type=int, required=True)
    ap.add_argument("--time", type=int, default=10, help="seconds per timed run")
    ap.add_argument("--requests", type=int, default=1_000_000,
                    help="redis-benchmark requests per command at pipeline 1 (x8 at 16)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    (a.outdir / "raw").mkdir(parents=True, exist_ok=True)
    (a.outdir / "memaslap.cfg").write_text(
        # 16-byte keys, 32-byte values, SET:GET 1:1 (memaslap's config format).
        "key\n16 16 1\nvalue\n32 32 1\ncmd\n0 0.5\n1 0.5\n")
    redis_peers = ["redis-benchmark"] + (["memtier_benchmark"] if shutil.which("memtier_benchmark")
                                         else [])
    memcached_peers = ["memaslap"] if shutil.which("memcaslap") else []
    cases = [
        {"name": f"redis, {d}", "scheme": "redis", "port": a.redis_port, "pid": a.redis_pid,
         "depth": d, "tools": redis_peers + ["loadcell"]} for d in (1, 16)
    ] + [{"name": "memcached, 1", "scheme": "memcached", "port": a.memcached_port,
          "pid": a.memcached_pid, "depth": 1, "tools": memcached_peers + ["loadcell"]}]
    runs = []
    with (a.outdir / "runs.jsonl").open("a") as jl:
        for case in cases:
            for rep in range(a.reps):
                order = case["tools"] if rep % 2 == 0 else list(reversed(case["tools"]))
                for tool in order:
                    run = run_one(a, case, tool, rep)
                    runs.append(run)
                    jl.write(json.dumps(run) + "\n")
                    jl.flush()
                    time.sleep(1)
    text = table(runs, cases)
    (a.outdir / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
