#!/usr/bin/env python3
"""loadcell's wide-column workloads against the wide-column peers, driven by
bench/wide.sh:

    wide_bench.py --outdir DIR --loadcell BIN --system cassandra|hbase ...

cassandra: loadcell's PE randomWrite / randomRead over CQL against latte
(bench/latte/write.rn, read.rn: the same table shape, a 26-byte blob key and
a value of --value-size bytes, one prepared statement a call), on one
Cassandra. Same concurrency (loadcell --threads sessions, latte
--concurrency on one thread), same operations (latte -d N).

hbase: loadcell's PE tests through the Thrift2 gateway against HBase's own
PerformanceEvaluation (--nomapred, same rows per client, clients, value
size, --autoFlush=true), which talks HBase's native RPC. loadcell's column
also gives the gateway JVM's CPU over its run, to be added for a fair
client-side comparison.

Tools alternate, the first one rotating per rep. Client CPU is the child's
rusage (bench/measure.py): the whole JVM for PE. Each tool's fixed cost
(process start, a JVM's JIT, connections) is one --fixed-rows run of each
test after the measured rounds; the table gives the marginal CPU per
operation, (CPU - fixed CPU) / (ops - fixed ops), beside the whole
(BENCHMARKS' steady-state rule). DIR/runs.jsonl has every run with its
exact command; DIR/table.md the medians.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402
from sql_bench import log, server_cpu_s  # noqa: E402

BENCH = Path(__file__).resolve().parent


def loadcell_run(a, test: str, target: str, out: Path, extra: list[str], rows: int) -> dict:
    argv = [a.loadcell, "run", test, "--target", target, "--rows", str(rows),
            "--threads", str(a.clients), "--value-size", str(a.value_size),
            "--out", str(out), *extra]
    if test.endswith("Write"):
        argv += ["--auto-flush", "true"]
    m = measure(argv, timeout=1800)
    r = json.loads(out.read_text()) if out.exists() else {}
    ops = r.get("summary", {}).get("ops", 0) or sum(
        o.get("count", 0) for o in r.get("ops", {}).values())
    rate = r.get("summary", {}).get("ops_per_sec", math.nan)
    errors = sum(o.get("errors", 0) for o in r.get("ops", {}).values())
    return {"argv": argv, "rc": m.returncode, "ops": ops, "ops_per_s": rate,
            "errors": errors, "cpu_s": m.cpu_s, "wall_s": m.wall_s,
            "stderr": m.stderr[-400:]}


def latte_run(a, test: str, host: str, out: Path, rows: int) -> dict:
    script = str(BENCH / "latte" / ("write.rn" if test == "randomWrite" else "read.rn"))
    n = rows * a.clients
    # Reads draw from every row the fill wrote, however many this run makes.
    keys = a.rows * a.clients
    argv = [a.latte, "run", script, "-d", str(n), "--threads", "1",
            "--concurrency", str(a.clients), "-P", f"rows={keys}",
            "-P", f"value_size={a.value_size}", "-o", str(out), "-q", host]
    m = measure(argv, timeout=1800, cwd=str(out.parent))  # latte logs into its cwd
    rate = math.nan
    if out.exists():
        rate = json.loads(out.read_text())["result"]["cycle_throughput"]["value"]
    if math.isnan(rate):
        found = re.findall(r"Throughput\s+\[op/s\]\s+([0-9.]+)", m.stdout)
        rate = float(found[-1]) if found else math.nan
    return {"argv": argv, "rc": m.returncode, "ops": n, "ops_per_s": rate, "errors": 0,
            "cpu_s": m.cpu_s, "wall_s": m.wall_s, "stderr": m.stderr[-400:]}


def pe_run(a, test: str, conf: str, rows: int) -> dict:
    classpath = f"{conf}:{a.hbase_lib}/*:{a.pe_jars}"
    # HBase's client on Java 17 needs the server's module openings.
    jvmopts = (BENCH.parent / "crates/testkit/assets/hbase/jvmopts").read_text().split()
    opens = [o for o in jvmopts if o.startswith(("--add-", "-Dorg.apache", "-Djava.net"))]
    # Not -Xmx512m: each PE client thread allocates eight 500k-sample
    # reservoirs (~32 MB), and 16 clients died of "OutOfMemoryError: Java
    # heap space" in PE's testSetup, exiting 255.
    argv = ["java", "-Xmx2g", *opens, "-cp", classpath,
            "org.apache.hadoop.hbase.PerformanceEvaluation", "--nomapred",
            f"--rows={rows}", f"--valueSize={a.value_size}", "--autoFlush=true",
            "--presplit=0", test, str(a.clients)]
    m = measure(argv, timeout=1800)
    text = m.stdout + m.stderr
    # Each client logs "Finished class ...$RandomWriteTest in Nms at offset
    # O for R rows"; the test's throughput is every row over the slowest
    # client's time.
    times = [int(t) for t in re.findall(r"Finished class \S+ in (\d+)ms at offset", text)]
    ops = rows * a.clients
    rate = ops / (max(times) / 1000) if times else math.nan
    return {"argv": argv, "rc": m.returncode, "ops": ops, "ops_per_s": rate, "errors": 0,
            "cpu_s": m.cpu_s, "wall_s": m.wall_s, "stderr": text[-600:]}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--outdir", required=True)
    p.add_argument("--loadcell", required=True)
    p.add_argument("--system", choices=["cassandra", "hbase"], required=True)
    p.add_argument("--address", help="Cassandra's host:port")
    p.add_argument("--latte", default="latte")
    p.add_argument("--thrift-url", help="HBase's Thrift2 gateway URL")
    p.add_argument("--thrift-pid", type=int)
    p.add_argument("--conf", help="HBase's conf dir (for PE)")
    p.add_argument("--hbase-lib")
    p.add_argument("--pe-jars", help="PE's jars as a class path (hbase-mapreduce's and hbase-server's tests jars)")
    p.add_argument("--tests", default="randomWrite,randomRead")
    p.add_argument("--rows", type=int, default=2000, help="rows per client")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--value-size", type=int, default=1000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=2, help="uncounted rounds first")
    p.add_argument("--fixed-rows", type=int, default=10,
                   help="rows per client of each tool's fixed-cost run (0: none)")
    a = p.parse_args()
    outdir = Path(a.outdir)
    runs = outdir / "runs.jsonl"
    peer = "latte" if a.system == "cassandra" else "PE"
    if a.system == "cassandra":
        target = f"cql://{a.address}/lc_bench"
        host = a.address.split(":")[0] + ":" + a.address.split(":")[1]
        schema = measure([a.latte, "schema", str(BENCH / "latte" / "read.rn"), host],
                         cwd=str(outdir))
        load = measure([a.latte, "load", str(BENCH / "latte" / "read.rn"), "-P",
                        f"rows={a.rows * a.clients}", "-P", f"value_size={a.value_size}", host],
                       cwd=str(outdir))
        log(f"latte schema rc {schema.returncode}, load rc {load.returncode} {load.stderr[-300:]}")
    else:
        target = a.thrift_url
    prep = measure([a.loadcell, "prepare", "sequentialWrite", "--target", target])
    fill = measure([a.loadcell, "run", "sequentialWrite", "--target", target, "--rows",
                    str(a.rows), "--threads", str(a.clients), "--value-size",
                    str(a.value_size), "--out", str(outdir / "fill.json")])
    log(f"loadcell prepare rc {prep.returncode}, fill rc {fill.returncode}")
    if a.system == "hbase":
        # PE's own table for its reads: its sequentialWrite fills it.
        pe_fill = pe_run(a, "sequentialWrite", a.conf, a.rows)
        log(f"PE fill rc {pe_fill['rc']}")
    results: dict[tuple[str, str], list[dict]] = {}
    # The first --warmup rounds warm the server's JIT and caches and are
    # not counted: on a fresh Cassandra the first 32,000 reads ran at a
    # fifth of the rate of the fifth 32,000.
    fixed: dict[tuple[str, str], dict] = {}
    rounds = [(rep, a.rows) for rep in range(-a.warmup, a.reps)]
    if a.fixed_rows:
        rounds.append(("fixed", a.fixed_rows))
    for rep, rows in rounds:
        for test in a.tests.split(","):
            tools = ["loadcell", peer] if rep == "fixed" or rep % 2 == 0 else [peer, "loadcell"]
            for tool in tools:
                out = outdir / f"{tool}-{test}-{rep}.json"
                gateway0 = server_cpu_s(a.thrift_pid) if a.thrift_pid else math.nan
                if tool == "loadcell":
                    # One worker thread against latte's --threads 1.
                    same_threads = ["--workers", "1"] if peer == "latte" else []
                    r = loadcell_run(a, test, target, out, same_threads, rows)
                elif tool == "latte":
                    r = latte_run(a, test, host, out, rows)
                else:
                    r = pe_run(a, test, a.conf, rows)
                r.update(tool=tool, test=test, rep=rep)
                if a.thrift_pid:
                    r["gateway_cpu_s"] = server_cpu_s(a.thrift_pid) - gateway0
                r["cpu_us_per_op"] = r["cpu_s"] / r["ops"] * 1e6 if r["ops"] else math.nan
                log(f"{tool} {test} rep {rep}: {r['ops_per_s']:.0f} ops/s, "
                    f"{r['cpu_us_per_op']:.1f} µs CPU/op, rc {r['rc']}")
                with runs.open("a") as f:
                    f.write(json.dumps(r) + "\n")
                if rep == "fixed":
                    fixed[(test, tool)] = r
                elif rep >= 0:
                    results.setdefault((test, tool), []).append(r)
    lines = ["| test | tool | ops/s (median) | client CPU µs/op (median) | marginal µs/op "
             "| fixed cost (CPU s) | gateway CPU µs/op | runs |",
             "|---|---|---|---|---|---|---|---|"]
    for (test, tool), rs in sorted(results.items()):
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        gw = (statistics.median(r["gateway_cpu_s"] / r["ops"] * 1e6 for r in rs)
              if tool == "loadcell" and a.thrift_pid else math.nan)
        f = fixed.get((test, tool))
        fixed_cpu = f"{f['cpu_s']:.2f}" if f else ""
        marginal = (statistics.median((r["cpu_s"] - f["cpu_s"]) / (r["ops"] - f["ops"]) * 1e6
                                      for r in rs) if f else math.nan)
        lines.append(f"| {test} | {tool} | {med('ops_per_s'):.0f} | {med('cpu_us_per_op'):.1f} "
                     f"| {'' if math.isnan(marginal) else f'{marginal:.1f}'} "
                     f"| {fixed_cpu} "
                     f"| {'' if math.isnan(gw) else f'{gw:.1f}'} | {len(rs)} |")
    (outdir / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
