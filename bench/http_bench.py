#!/usr/bin/env python3
"""HTTP peers vs loadcell on one nginx. Driven by bench/http.sh:

    http_bench.py --outdir DIR --loadcell BIN --clients BIN --oha BIN --k6 BIN \
                  --vegeta BIN --port P --nginx-pid PID --time S --reps N --rates R...

Scenarios (issue 16, item 6), GET of a 612-byte static file:
  keepalive  2 threads x 50 connections, closed loop: loadcell, wrk, oha;
  rate       a fixed rate for each of --rates: loadcell (evenly, and in 1 ms
             bursts with --rate-tick 1ms), k6 (constant-arrival-rate), vegeta,
             100 connections (VUs) each;
  stall      loadcell at the lowest rate, nginx's worker stopped (SIGSTOP) for
             200 ms half-way through;
  http1      hyper 1's client::conn::http1 vs loadcell's HTTP/1.1 client in one
             harness (bench/http1_clients.rs), 2 threads x 50 connections.
Tools alternate within each repetition, in a rotating order, so drift hits all.
Every run goes to DIR/runs.jsonl with its exact command, requests, rate,
latency, the client's CPU (rusage, via measure.py) and nginx's CPU over the
same window; DIR/table.md is the summary (medians of the reps).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402
from sql_bench import log, server_cpu_s  # noqa: E402

THREADS, CONNS_PER_THREAD = 2, 50
CONNS = THREADS * CONNS_PER_THREAD


def loadcell_cmd(a, url: str, out: Path, rate: int | None = None) -> list[str]:
    cmd = [a.loadcell, "run", "http", "--target", url, "--threads", str(THREADS),
           "--clients", str(CONNS_PER_THREAD), "--workers", str(THREADS),
           "--time", f"{a.time}s", "--out", str(out)]
    if rate:
        cmd += ["--rate", str(rate)]
    return cmd


def parse_loadcell(path: Path) -> dict:
    s = json.loads(path.read_text())["summary"]
    return {"requests": s["events"], "rate": s["events_per_sec"],
            "p50_ms": s["latency_ms"]["p50"], "p99_ms": s["latency_ms"]["p99"],
            "p999_ms": s["latency_ms"]["p999"], "max_ms": s["latency_ms"]["max"],
            "service_p99_ms": s["service_time_ms"]["p99"], "errors": s["errors"]}


def wrk_ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise RuntimeError(f"unexpected wrk latency {text!r}")
    return float(m[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m[2]]


def parse_wrk(text: str) -> dict:
    requests = int(re.search(r"(\d+) requests in", text)[1])
    pct = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", text, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    return {"requests": requests, "rate": float(re.search(r"Requests/sec:\s+([\d.]+)", text)[1]),
            "p50_ms": wrk_ms(pct["50"]), "p99_ms": wrk_ms(pct["99"]),
            "errors": int(errors[1]) if errors else 0}


def parse_oha(text: str) -> dict:
    j = json.loads(text)
    codes = j.get("statusCodeDistribution", {})
    ok = sum(v for k, v in codes.items() if k.startswith("2"))
    lat = j["latencyPercentiles"]
    return {"requests": sum(codes.values()), "rate": j["summary"]["requestsPerSec"],
            "p50_ms": lat["p50"] * 1e3, "p99_ms": lat["p99"] * 1e3,
            "errors": sum(codes.values()) - ok + sum(j.get("errorDistribution", {}).values())}


K6_SCRIPT = """import http from 'k6/http';
export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ['p(50)', 'p(99)', 'max'],
  scenarios: { fixed: { executor: 'constant-arrival-rate', rate: %(rate)d, timeUnit: '1s',
    duration: '%(time)ds', preAllocatedVUs: %(vus)d, maxVUs: %(vus)d } },
};
export default function () { http.get('%(url)s'); }
export function handleSummary(data) { return { '%(summary)s': JSON.stringify(data) }; }
"""


def parse_k6(path: Path) -> dict:
    m = json.loads(path.read_text())["metrics"]
    dur = m["http_req_duration"]["values"]
    failed = m.get("http_req_failed", {}).get("values", {}).get("passes", 0)
    return {"requests": m["http_reqs"]["values"]["count"], "rate": m["http_reqs"]["values"]["rate"],
            "p50_ms": dur["p(50)"], "p99_ms": dur["p(99)"], "max_ms": dur["max"],
            "dropped": m.get("dropped_iterations", {}).get("values", {}).get("count", 0),
            "errors": failed}


def parse_vegeta(text: str) -> dict:
    j = json.loads(text)
    lat = j["latencies"]
    ok = sum(v for k, v in j["status_codes"].items() if k.startswith("2"))
    return {"requests": j["requests"], "rate": j["throughput"], "offered": j["rate"],
            "p50_ms": lat["50th"] / 1e6, "p99_ms": lat["99th"] / 1e6, "max_ms": lat["max"] / 1e6,
            "errors": j["requests"] - ok}


def nginx_worker(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return int(children[0])


def run(a, rows: list, scenario: str, tool: str, cmd: list[str], parse, *, rep: int,
        stall_at: float | None = None, **extra) -> None:
    """Runs cmd once, measured; records it with what parse(stdout) found."""
    log(f"{scenario} {tool} rep {rep}: {' '.join(cmd)}")
    nginx0 = server_cpu_s(a.nginx_pid)
    stall = None
    if stall_at is not None:
        worker = nginx_worker(a.nginx_pid)

        def freeze() -> None:
            time.sleep(stall_at)
            os.kill(worker, signal.SIGSTOP)
            time.sleep(0.2)
            os.kill(worker, signal.SIGCONT)

        stall = threading.Thread(target=freeze)
        stall.start()
    m = measure(cmd, timeout=a.time * 4 + 60)
    if stall:
        stall.join()
    nginx_cpu = server_cpu_s(a.nginx_pid) - nginx0
    if m.returncode != 0:
        raise RuntimeError(f"{tool} failed ({m.returncode}): {m.stderr[-2000:]}")
    found = parse(m.stdout)
    row = {"scenario": scenario, "tool": tool, "rep": rep, "cmd": cmd, **extra, **found,
           "client_cpu_s": m.cpu_s, "wall_s": m.wall_s, "nginx_cpu_s": nginx_cpu,
           "cpu_us_per_request": m.cpu_s * 1e6 / max(found["requests"], 1)}
    rows.append(row)
    with open(a.outdir / "runs.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    log(f"  {found['rate']:.0f} req/s, {row['cpu_us_per_request']:.2f} us CPU/request, "
        f"p99 {found['p99_ms']:.2f} ms")


def rotated(tools: list, rep: int) -> list:
    k = rep % len(tools)
    return tools[k:] + tools[:k]


def main() -> None:
    p = argparse.ArgumentParser()
    for opt in ("loadcell", "clients", "oha", "k6", "vegeta"):
        p.add_argument(f"--{opt}", required=True)
    p.add_argument("--outdir", type=Path, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--nginx-pid", type=int, required=True)
    p.add_argument("--time", type=int, default=10)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rates", type=int, nargs="+", default=[20000, 5000])
    a = p.parse_args()
    url = f"http://127.0.0.1:{a.port}/index.html"
    rows: list[dict] = []
    lc_out = a.outdir / "loadcell.json"

    def lc(path_out: Path):
        return lambda _stdout: parse_loadcell(path_out)

    for rep in range(a.reps):
        tools = [
            ("loadcell", loadcell_cmd(a, url, lc_out), lc(lc_out)),
            ("wrk", ["wrk", f"-t{THREADS}", f"-c{CONNS}", f"-d{a.time}s", "--latency", url],
             parse_wrk),
            ("oha", [a.oha, "-c", str(CONNS), "-z", f"{a.time}s", "--no-tui",
                     "--output-format", "json", url], parse_oha),
        ]
        for tool, cmd, parse in rotated(tools, rep):
            run(a, rows, "keepalive", tool, cmd, parse, rep=rep)

    for rate in a.rates:
        for rep in range(a.reps):
            summary = a.outdir / "k6-summary.json"
            script = a.outdir / f"k6-{rate}.js"
            script.write_text(K6_SCRIPT % {"rate": rate, "time": a.time, "vus": CONNS,
                                           "url": url, "summary": summary})
            targets = a.outdir / "vegeta-targets.txt"
            targets.write_text(f"GET {url}\n")
            results = a.outdir / "vegeta.bin"
            vegeta_cmd = [a.vegeta, "attack", f"-rate={rate}/s", f"-duration={a.time}s",
                          f"-targets={targets}", f"-connections={CONNS}", f"-workers={CONNS}",
                          f"-max-workers={CONNS}", f"-output={results}"]

            def parse_vegeta_run(_stdout: str, results=results) -> dict:
                report = measure([a.vegeta, "report", "-type=json", str(results)])
                results.unlink()
                return parse_vegeta(report.stdout)

            tools = [
                ("loadcell", loadcell_cmd(a, url, lc_out, rate), lc(lc_out)),
                # wrk2's 1 ms timer: the events of each millisecond leave together.
                ("loadcell --rate-tick 1ms",
                 loadcell_cmd(a, url, lc_out, rate) + ["--rate-tick", "1ms"], lc(lc_out)),
                ("k6", [a.k6, "run", "--quiet", "--no-color", str(script)],
                 lambda _s, summary=summary: parse_k6(summary)),
                ("vegeta", vegeta_cmd, parse_vegeta_run),
            ]
            for tool, cmd, parse in rotated(tools, rep):
                run(a, rows, f"rate {rate}", tool, cmd, parse, rep=rep, target_rate=rate)

    stall_rate = min(a.rates)
    run(a, rows, f"stall at {stall_rate}", "loadcell", loadcell_cmd(a, url, lc_out, stall_rate),
        lc(lc_out), rep=0, stall_at=a.time / 2, target_rate=stall_rate)

    for rep in range(max(a.reps, 5)):
        for client in rotated(["loadcell", "hyper"], rep):
            cmd = [a.clients, client, url, str(THREADS), str(CONNS_PER_THREAD), str(a.time)]
            run(a, rows, "http1 client", client, cmd,
                lambda s: {**json.loads(s), "rate": json.loads(s)["requests_per_s"],
                           "p99_ms": float("nan")}, rep=rep)

    lines = ["| scenario | tool | runs | req/s | client CPU µs/req | p50 ms | p99 ms | max ms |",
             "|---|---|---|---|---|---|---|---|"]
    keys = list(dict.fromkeys((r["scenario"], r["tool"]) for r in rows))
    for scenario, tool in keys:
        rs = [r for r in rows if (r["scenario"], r["tool"]) == (scenario, tool)]

        def med(k: str) -> str:
            xs = [r[k] for r in rs if r.get(k) is not None and r[k] == r[k]]
            return f"{statistics.median(xs):.2f}" if xs else "–"

        lines.append(f"| {scenario} | {tool} | {len(rs)} | {med('rate')} | "
                     f"{med('cpu_us_per_request')} | {med('p50_ms')} | {med('p99_ms')} | "
                     f"{med('max_ms')} |")
    (a.outdir / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
