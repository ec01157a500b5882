#!/usr/bin/env python3
"""loadcell vs esrally (or its fork OpenSearch Benchmark) on one OpenSearch.
Driven by bench/search.sh:

    ESRALLY=BIN search_bench.py --outdir DIR --loadcell BIN --url URL --server-pid PID \
                    --track DIR --clients C --bulk-size B --queries Q --reps N

Both index the same corpus (bench/search_corpus.py: DIR/documents.json) in
bulks of B with C clients into an index of their own (6 shards, 0 replicas,
the same mapping), then run the same term and match_phrase queries Q times
each with C clients, closed loop. Tools alternate, in a rotating order.

CPU: each client command runs in a cgroup of its own (cpuacct), so esrally's
actor-system processes, which it starts in the background, are counted with
it. esrally's fixed cost (Python start-up, the actor system, track loading)
is measured by a race that runs only a cluster-health check, and shown
apart: "esrally" rows are the whole race, "esrally − start-up" subtract it.
The server's CPU over the same window is /proc's (bench/sql_bench.py).

DIR/runs.jsonl has every run with its exact command; DIR/table.md the medians.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sql_bench import log, server_cpu_s  # noqa: E402

CGROUP = Path("/sys/fs/cgroup/cpuacct")


def in_cgroup(name: str, cmd: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float, float]:
    """Runs cmd in a fresh cpuacct cgroup: (process, CPU seconds, wall seconds).
    Processes it leaves behind (esrally's actor system) are killed by PID."""
    cg = CGROUP / f"loadcell-bench-{os.getpid()}-{name}"
    cg.mkdir()
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=lambda: (cg / "cgroup.procs").write_text(str(os.getpid())))
    wall = time.monotonic() - start
    cpu = int((cg / "cpuacct.usage").read_text()) / 1e9
    for pid in (cg / "cgroup.procs").read_text().split():
        try:
            os.kill(int(pid), 9)
        except ProcessLookupError:
            pass
    for _ in range(50):
        if not (cg / "cgroup.procs").read_text().strip():
            break
        time.sleep(0.1)
    cg.rmdir()
    return p, cpu, wall


def esrally_cmd(a, include: str, report: Path) -> list[str]:
    """A race of the track's tasks `include`: esrally's `race`, or its fork
    OpenSearch Benchmark's `run` (the same engine; esrally 2.13's client
    refuses OpenSearch: UnsupportedProductError)."""
    host = a.url.split("//", 1)[1]
    common = ["--pipeline=benchmark-only", f"--target-hosts={host}", "--offline",
              "--on-error=abort", f"--include-tasks={include}",
              "--client-options=timeout:120", "--quiet"]
    if a.osb:
        return [a.esrally, "run", f"--workload-path={a.track}", *common,
                "--results-format=csv", f"--results-file={report}"]
    return [a.esrally, "race", f"--track-path={a.track}", *common, "--report-format=csv",
            f"--report-file={report}"]


def esrally_metrics(report: Path) -> dict:
    """(metric, task, unit) -> value, from esrally's CSV report."""
    rows = {}
    with report.open() as f:
        for row in csv.reader(f):
            if len(row) >= 4:
                rows[(row[0], row[1])] = row[2]
    return rows


def cpu_s(summary: dict) -> float:
    """loadcell's own CPU in its measured phase (start-up and the corpus's
    loading and checking left out), from its result."""
    return summary["client_cpu"]["user_s"] + summary["client_cpu"]["sys_s"]


def loadcell_index(a, index: str, *rest: str) -> list[str]:
    return [a.loadcell, *rest, "--target", a.url, "--index", index]


def main() -> None:
    p = argparse.ArgumentParser()
    for opt in ("outdir", "track"):
        p.add_argument(f"--{opt}", type=Path, required=True)
    for opt in ("loadcell", "url"):
        p.add_argument(f"--{opt}", required=True)
    p.add_argument("--server-pid", type=int, required=True)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--bulk-size", type=int, default=5000)
    p.add_argument("--queries", type=int, default=5000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3,
                   help="rounds of both tools first, not counted: a fresh OpenSearch's bulk "
                        "rate still rose 14.5k, 22.6k, 26.6k, 26.6k, 28.3k docs/s over its "
                        "first five 300,000-document bulks (2026-11-29)")
    a = p.parse_args()
    # From the environment: esrally refuses to race while a process whose
    # command line names it runs, and would take this one for another race.
    a.esrally = os.environ["ESRALLY"]
    a.osb = Path(a.esrally).name == "opensearch-benchmark"
    rally = "opensearch-benchmark" if a.osb else "esrally"
    corpus = a.track / "documents.json"
    documents = sum(1 for _ in corpus.open())
    rows: list[dict] = []

    def record(row: dict) -> None:
        row["cpu_us_per_unit"] = row["client_cpu_s"] * 1e6 / max(row["units"], 1)
        if row["rep"] < 0:
            log(f"  warm-up {row['scenario']} {row['tool']}: not counted")
            return
        rows.append(row)
        with open(a.outdir / "runs.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        log(f"  {row['scenario']} {row['tool']}: {row['rate']:.0f}/s, "
            f"{row['cpu_us_per_unit']:.2f} us CPU per {row['unit']}, p50 {row['p50_ms']:.2f} ms")

    def measured(scenario: str, tool: str, rep: int, cmd: list[str], unit: str):
        log(f"{scenario} {tool} rep {rep}: {' '.join(cmd)}")
        server0 = server_cpu_s(a.server_pid)
        proc, cpu, wall = in_cgroup(f"{tool}-{scenario}-{rep}".replace(" ", "_"), cmd, 1800)
        if proc.returncode not in (0,):
            raise RuntimeError(f"{tool} failed ({proc.returncode}): {proc.stderr[-3000:]}{proc.stdout[-2000:]}")
        return proc, {"scenario": scenario, "tool": tool, "rep": rep, "cmd": cmd, "unit": unit,
                      "client_cpu_s": cpu, "wall_s": wall,
                      "server_cpu_s": server_cpu_s(a.server_pid) - server0}

    # esrally's fixed cost: a race that only checks the cluster's health.
    startup = []
    for rep in range(a.reps):
        report = a.outdir / "esrally-startup.csv"
        _, row = measured("start-up", rally, rep,
                          esrally_cmd(a, "type:cluster-health", report), "race")
        startup.append(row["client_cpu_s"])
        log(f"  {rally} start-up: {row['client_cpu_s']:.2f} s CPU")
    startup_s = statistics.median(startup)

    lc_index = "loadcell-bench"
    # What the track's query tasks send: their warm-up iterations and the
    # measured ones (search_corpus.py), all in the Rally's CPU.
    queries_sent = a.queries + a.queries // 10
    queries = {"term": a.track / "term.toml", "phrase": a.track / "phrase.toml"}
    # Reps below 0 warm the JVM up for both (JIT, caches); not counted.
    for rep in range(-a.warmup, a.reps):
        tools = ["loadcell", rally][rep % 2:] + ["loadcell", rally][:rep % 2]
        for tool in tools:
            if tool == "loadcell":
                subprocess.run(loadcell_index(a, lc_index, "cleanup", "search-bulk"),
                               capture_output=True)
                subprocess.run(loadcell_index(a, lc_index, "prepare", "search-bulk", "--corpus",
                                              str(corpus), "--mapping", str(a.track / "index.json")),
                               check=True, capture_output=True)
                out = a.outdir / f"lc-bulk-{rep}.json"
                cmd = loadcell_index(a, lc_index, "run", "search-bulk", "--corpus", str(corpus),
                                     "--mapping", str(a.track / "index.json"),
                                     "--bulk-size", str(a.bulk_size), "--threads", str(a.clients),
                                     "--out", str(out))
                _, row = measured("bulk", tool, rep, cmd, "document")
                r = json.loads(out.read_text())
                s = r["summary"]
                assert r["verification"]["ok"], r["verification"]
                row.update(units=s["items"], rate=s["items_per_sec"], measured_cpu_s=cpu_s(s),
                           p50_ms=s["service_time_ms"]["p50"], errors=s["errors"],
                           verification=r["verification"])
                record(row)
                for name, qfile in queries.items():
                    out = a.outdir / f"lc-{name}-{rep}.json"
                    cmd = loadcell_index(a, lc_index, "run", "search-query", "--query-file",
                                         str(qfile), "--threads", str(a.clients),
                                         "--events", str(queries_sent),
                                         "--out", str(out))
                    _, row = measured(name, tool, rep, cmd, "query")
                    s = json.loads(out.read_text())["summary"]
                    row.update(units=s["events"], rate=s["events_per_sec"], measured_cpu_s=cpu_s(s),
                               p50_ms=s["service_time_ms"]["p50"], errors=s["errors"])
                    record(row)
                subprocess.run(loadcell_index(a, lc_index, "cleanup", "search-bulk"),
                               check=True, capture_output=True)
            else:
                report = a.outdir / f"esrally-bulk-{rep}.csv"
                _, row = measured("bulk", tool, rep, esrally_cmd(
                    a, "type:delete-index,type:create-index,type:cluster-health,"
                       "index-append,type:refresh", report), "document")
                m = esrally_metrics(report)
                row.update(units=documents, rate=float(m[("Median Throughput", "index-append")]),
                           p50_ms=float(m[("50th percentile service time", "index-append")]),
                           errors=float(m.get(("error rate", "index-append"), 0)))
                record(row)
                for name in queries:
                    report = a.outdir / f"esrally-{name}-{rep}.csv"
                    _, row = measured(name, tool, rep, esrally_cmd(a, name, report), "query")
                    m = esrally_metrics(report)
                    row.update(units=queries_sent, rate=float(m[("Median Throughput", name)]),
                               p50_ms=float(m[("50th percentile service time", name)]),
                               errors=float(m.get(("error rate", name), 0)))
                    record(row)

    lines = [f"{rally} start-up (a race of one cluster-health check): {startup_s:.2f} s CPU "
             f"(median of {len(startup)})", "",
             "| scenario | tool | runs | rate /s | client CPU µs per unit | p50 service ms | server CPU s |",
             "|---|---|---|---|---|---|---|"]
    # Whole processes, then steady state: loadcell's measured phase, and the
    # Rally less its start-up.
    for scenario in ("bulk", "term", "phrase"):
        for tool in ("loadcell", rally, "loadcell, measured phase", f"{rally} − start-up"):
            base = rally if tool.startswith(rally) else "loadcell"
            rs = [r for r in rows if r["scenario"] == scenario and r["tool"] == base]
            if not rs:
                continue
            if tool == "loadcell, measured phase":
                cpu = [r["measured_cpu_s"] * 1e6 / max(r["units"], 1) for r in rs]
            else:
                cpu = [((r["client_cpu_s"] - (startup_s if tool != base else 0)) * 1e6
                        / max(r["units"], 1)) for r in rs]
            lines.append(
                f"| {scenario} | {tool} | {len(rs)} | {statistics.median(r['rate'] for r in rs):.0f} | "
                f"{statistics.median(cpu):.2f} | {statistics.median(r['p50_ms'] for r in rs):.2f} | "
                f"{statistics.median(r['server_cpu_s'] for r in rs):.1f} |")
    (a.outdir / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
