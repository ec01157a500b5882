#!/usr/bin/env python3
"""sysbench vs loadcell on one SQL server: same tables, threads, duration.

Driven by bench/sql.sh, which starts the server (bench/servers.sh) and calls:

    sql_bench.py run --server mariadb|postgres --port P --server-pid PID --outdir DIR
    sql_bench.py report DIR            # Markdown table on stdout, summary.{json,csv} in DIR

`run` prepares 4 x 100k rows with sysbench, then for each workload runs a short
unrecorded warm-up of each tool followed by REPS alternating measured pairs
(sysbench, loadcell, loadcell, sysbench, ...), then `sysbench cleanup`. Every
run is appended to DIR/runs.jsonl with the exact command, the parsed TPS/QPS/p95,
the client's CPU (rusage of the child, via measure.py), the server's CPU over the
same window (from /proc), and the load average before it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402

USER = PASSWORD = DB = "sbtest"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Commands


def sysbench_conn(server: str, port: int) -> list[str]:
    if server == "mariadb":
        return ["--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
                f"--mysql-user={USER}", f"--mysql-password={PASSWORD}", f"--mysql-db={DB}"]
    return ["--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={port}",
            f"--pgsql-user={USER}", f"--pgsql-password={PASSWORD}", f"--pgsql-db={DB}"]


def target_url(server: str, port: int) -> str:
    scheme = "mysql" if server == "mariadb" else "postgres"
    return f"{scheme}://{USER}:{PASSWORD}@127.0.0.1:{port}/{DB}"


def sysbench_cmd(a, workload: str, secs: int) -> list[str]:
    return ["sysbench", workload, *sysbench_conn(a.server, a.port),
            f"--tables={a.tables}", f"--table-size={a.table_size}",
            f"--threads={a.threads}", f"--time={secs}", "--report-interval=0",
            "--rand-type=special", "run"]


def loadcell_layout(a, tool: str) -> list[str]:
    """`loadcell`: its default, the sessions on one worker thread per core.
    `loadcell-perthread`: one worker thread per session, as sysbench."""
    if tool == "loadcell-perthread":
        return ["--threads", str(a.threads), "--workers", str(a.threads)]
    return ["--threads", str(a.threads)]


def loadcell_cmd(a, tool: str, workload: str, secs: int, out: Path) -> list[str]:
    return [a.loadcell, "run", workload, "--target", target_url(a.server, a.port),
            "--tables", str(a.tables), "--table-size", str(a.table_size),
            *loadcell_layout(a, tool), "--time", f"{secs}s",
            "--rand-type", "special", "--json", "--out", str(out)]


# ---------------------------------------------------------------------------
# Parsing


def parse_sysbench(text: str) -> dict:
    def grab(pattern: str, cast=float):
        m = re.search(pattern, text)
        if not m:
            raise ValueError(f"sysbench output has no match for {pattern!r}:\n{text[-2000:]}")
        return cast(m.group(1))

    return {
        "events": grab(r"total number of events:\s+(\d+)", int),
        "tps": grab(r"transactions:\s+\d+\s+\(([\d.]+) per sec"),
        "qps": grab(r"queries:\s+\d+\s+\(([\d.]+) per sec"),
        "queries": grab(r"queries:\s+(\d+)", int),
        "p95_ms": grab(r"95th percentile:\s+([\d.]+)"),
        "avg_ms": grab(r"avg:\s+([\d.]+)"),
        "duration_s": grab(r"total time:\s+([\d.]+)s"),
        "errors": grab(r"ignored errors:\s+(\d+)", int),
        "reconnects": grab(r"reconnects:\s+(\d+)", int),
    }


def parse_loadcell(path: Path) -> dict:
    r = json.loads(path.read_text())
    s = r["summary"]
    tps = s.get("txn_per_sec")
    if tps is None:
        tps = s["events_per_sec"]
    return {
        "events": s["events"],
        "tps": tps,
        "qps": s["ops_per_sec"],
        "queries": s["ops"],
        "p95_ms": s["latency_ms"]["p95"],
        "avg_ms": s["latency_ms"].get("mean"),
        "duration_s": s["duration_s"],
        "errors": s.get("errors", 0) + s.get("retries", 0),
        "reconnects": s.get("reconnects", 0),
        "self_reported_cpu_s": s["client_cpu"]["user_s"] + s["client_cpu"]["sys_s"],
        "status": r.get("status"),
    }


# ---------------------------------------------------------------------------
# Server CPU, from /proc: the process and its threads, its reaped children
# (cutime/cstime: PostgreSQL backends that exited), and its live children.


def _stat(pid: int) -> tuple[int, list[str]] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2:].split()  # fields from 3 (state) on
    return int(rest[1]), rest  # ppid


def server_cpu_s(pid: int) -> float:
    st = _stat(pid)
    if st is None:
        return float("nan")
    f = st[1]
    ticks = int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])  # utime stime cutime cstime
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != pid:
            c = _stat(int(d))
            if c and c[0] == pid:
                ticks += int(c[1][11]) + int(c[1][12])
    return ticks / CLK_TCK


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def busy_others(exclude: set[int]) -> list[str]:
    """Processes (other than ours and the server's) that used >20% CPU in the last second."""
    def snap() -> dict[int, tuple[str, int]]:
        out = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    raw = Path(f"/proc/{d}/stat").read_text()
                except OSError:
                    continue
                name = raw[raw.index("(") + 1:raw.rindex(")")]
                f = raw[raw.rindex(")") + 2:].split()
                out[int(d)] = (name, int(f[11]) + int(f[12]))
        return out
    a = snap()
    time.sleep(1)
    b = snap()
    busy = []
    for pid, (name, t) in b.items():
        if pid in exclude or pid not in a:
            continue
        pct = (t - a[pid][1]) * 100 / CLK_TCK
        if pct > 20:
            busy.append(f"{name}({pid}) {pct:.0f}%")
    return busy


# ---------------------------------------------------------------------------
# run


def run_one(a, tool: str, workload: str, secs: int, rep: int, warmup: bool, outdir: Path,
            runs_file: Path | None) -> dict:
    tag = f"{a.server}-{workload}-{tool}-{'warmup' if warmup else f'r{rep}'}"
    raw = outdir / "raw"
    raw.mkdir(exist_ok=True)
    lc_out = raw / f"{tag}.json"
    cmd = sysbench_cmd(a, workload, secs) if tool == "sysbench" else loadcell_cmd(a, tool, workload, secs, lc_out)
    others = busy_others({os.getpid(), a.server_pid})
    la = loadavg()
    cpu0 = server_cpu_s(a.server_pid)
    m = measure(cmd, timeout=secs + 120)
    time.sleep(1.0)  # let PostgreSQL reap the backends that just exited
    cpu1 = server_cpu_s(a.server_pid)
    (raw / f"{tag}.stdout").write_text(m.stdout)
    if m.stderr:
        (raw / f"{tag}.stderr").write_text(m.stderr)
    if m.returncode != 0:
        raise RuntimeError(f"{tag}: exit {m.returncode}\n{' '.join(cmd)}\n{m.stderr[-3000:]}{m.stdout[-2000:]}")
    parsed = parse_sysbench(m.stdout) if tool == "sysbench" else parse_loadcell(lc_out)
    rec = {
        "server": a.server, "server_version": a.server_version, "workload": workload, "tool": tool,
        "rep": rep, "warmup": warmup, "time_s": secs, "threads": a.threads,
        "tables": a.tables, "table_size": a.table_size,
        "cmd": cmd, "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - m.wall_s)),
        "loadavg_before": la, "busy_others_before": others,
        **parsed,
        "client_user_s": m.user_s, "client_sys_s": m.sys_s, "client_cpu_s": m.cpu_s,
        "client_wall_s": m.wall_s, "client_maxrss_kb": m.maxrss_kb,
        "server_cpu_s": cpu1 - cpu0,
    }
    rec["client_cpu_us_per_txn"] = rec["client_cpu_s"] / rec["events"] * 1e6 if rec["events"] else None
    rec["server_cpu_us_per_txn"] = rec["server_cpu_s"] / rec["events"] * 1e6 if rec["events"] else None
    log(f"{tag}: {rec['tps']:.1f} tps, {rec['qps']:.0f} qps, p95 {rec['p95_ms']:.2f} ms, "
        f"client cpu {m.cpu_s:.2f} s ({rec['client_cpu_us_per_txn']:.1f} us/txn), "
        f"server cpu {rec['server_cpu_s']:.1f} s, load {la[0]:.2f}"
        + (f", busy: {', '.join(others)}" if others else ""))
    if runs_file is not None:
        with runs_file.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    return rec


def cmd_run(a) -> int:
    outdir = Path(a.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    runs_file = outdir / "runs.jsonl"
    tools = a.tools.split(",")
    conn = sysbench_conn(a.server, a.port)
    size = [f"--tables={a.tables}", f"--table-size={a.table_size}"]

    log(f"{a.server}: sysbench prepare {a.tables} x {a.table_size}")
    m = measure(["sysbench", "oltp_read_write", *conn, *size, "--threads=4", "prepare"], timeout=1800)
    (outdir / f"{a.server}-prepare.log").write_text(m.stdout + m.stderr)
    if m.returncode != 0:
        raise RuntimeError(f"sysbench prepare failed:\n{m.stdout[-2000:]}{m.stderr[-2000:]}")
    log(f"{a.server}: prepared in {m.wall_s:.1f} s")
    if a.server == "postgres":
        # Fresh tables: vacuum + analyze once so autovacuum doesn't kick in mid-run
        # for one tool and not the other.
        subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(a.port), "-U", USER, "-d", DB,
                        "-c", "VACUUM ANALYZE " + ", ".join(f"sbtest{i}" for i in range(1, a.tables + 1))],
                       check=True, env={**os.environ, "PGPASSWORD": PASSWORD})
    else:
        subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", f"-P{a.port}", f"-u{USER}",
                        f"-p{PASSWORD}", DB, "-e",
                        "ANALYZE TABLE " + ", ".join(f"sbtest{i}" for i in range(1, a.tables + 1))],
                       check=True, stdout=subprocess.DEVNULL)

    try:
        for workload in a.workloads.split(","):
            if a.warmup > 0:
                for tool in tools:
                    run_one(a, tool, workload, a.warmup, 0, True, outdir, runs_file)
            for rep in range(1, a.reps + 1):
                order = tools if rep % 2 == 1 else list(reversed(tools))
                for tool in order:
                    run_one(a, tool, workload, a.time, rep, False, outdir, runs_file)
    finally:
        log(f"{a.server}: sysbench cleanup")
        subprocess.run(["sysbench", "oltp_read_write", *conn, *size, "cleanup"],
                       stdout=subprocess.DEVNULL, check=False)
    return 0


# ---------------------------------------------------------------------------
# report


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def summarize(runs: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        if not r["warmup"]:
            groups.setdefault((r["server"], r["workload"], r["tool"]), []).append(r)
    rows = []
    for (server, workload, tool), rs in groups.items():
        events = sum(r["events"] for r in rs)
        rows.append({
            "server": server, "server_version": rs[0].get("server_version"),
            "workload": workload, "tool": tool, "runs": len(rs),
            "time_s": rs[0]["time_s"], "threads": rs[0]["threads"],
            "tps": _mean(r["tps"] for r in rs),
            "tps_min": min(r["tps"] for r in rs), "tps_max": max(r["tps"] for r in rs),
            "qps": _mean(r["qps"] for r in rs),
            "p95_ms": _mean(r["p95_ms"] for r in rs),
            "errors": sum(r["errors"] for r in rs),
            "client_cpu_s": _mean(r["client_cpu_s"] for r in rs),
            "client_user_s": _mean(r["client_user_s"] for r in rs),
            "client_sys_s": _mean(r["client_sys_s"] for r in rs),
            "client_cpu_us_per_txn": sum(r["client_cpu_s"] for r in rs) / events * 1e6 if events else None,
            "server_cpu_us_per_txn": sum(r["server_cpu_s"] for r in rs) / events * 1e6 if events else None,
            "loadavg_before": _mean(r["loadavg_before"][0] for r in rs),
            "cmd": rs[0]["cmd"],
        })
    order = {"mariadb": 0, "postgres": 1, "sysbench": 0, "loadcell": 1, "loadcell-perthread": 2,
             "oltp_read_write": 0, "oltp_point_select": 1}
    rows.sort(key=lambda r: (order.get(r["server"], 9), order.get(r["workload"], 9), r["workload"],
                             order.get(r["tool"], 9)))
    by = {(r["server"], r["workload"], r["tool"]): r for r in rows}
    for r in rows:
        sb = by.get((r["server"], r["workload"], "sysbench"))
        if r["tool"].startswith("loadcell") and sb:
            r["tps_ratio"] = r["tps"] / sb["tps"]
            r["cpu_per_txn_ratio"] = r["client_cpu_us_per_txn"] / sb["client_cpu_us_per_txn"]
            r["p95_ratio"] = r["p95_ms"] / sb["p95_ms"] if sb["p95_ms"] else None
            r["meets_targets"] = r["tps_ratio"] >= 1.0 and r["cpu_per_txn_ratio"] <= 0.8
            r.update(paired_rounds(groups[(r["server"], r["workload"], r["tool"])],
                                   groups[(r["server"], r["workload"], "sysbench")]))
    return rows


def paired_rounds(tool_runs: list[dict], sysbench_runs: list[dict]) -> dict:
    """Ratios of each round's two back-to-back runs. The VM's speed drifts by
    tens of percent over minutes; within a round both tools see the same
    speed, so the spread of these ratios shows what the drift does to them."""
    sb_by_rep = {r["rep"]: r for r in sysbench_runs}
    tps, cpu = [], []
    for r in sorted(tool_runs, key=lambda r: r["rep"]):
        sb = sb_by_rep.get(r["rep"])
        if sb and r["events"] and sb["events"]:
            tps.append(r["tps"] / sb["tps"])
            cpu.append((r["client_cpu_s"] / r["events"]) / (sb["client_cpu_s"] / sb["events"]))
    return {
        "round_tps_ratios": tps,
        "round_cpu_ratios": cpu,
        "rounds_meeting_targets": sum(t >= 1.0 and c <= 0.8 for t, c in zip(tps, cpu)),
    }


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})" if xs else ""


def markdown(rows: list[dict]) -> str:
    names = {"mariadb": "MariaDB", "postgres": "PostgreSQL"}
    out = ["| server | workload | tool | TPS (min–max) | QPS | p95 ms | client CPU s (user+sys) "
           "| client CPU µs/txn | server CPU µs/txn | loadcell/sysbench: TPS | CPU/txn | p95 "
           "| per round: TPS ratio, median (min–max) | CPU/txn ratio | rounds meeting both |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = ("| {:.2f} | {:.2f} | {:.2f} | {} | {} | {} of {} |".format(
            r["tps_ratio"], r["cpu_per_txn_ratio"], r["p95_ratio"] or 0,
            _spread(r["round_tps_ratios"]), _spread(r["round_cpu_ratios"]),
            r["rounds_meeting_targets"], len(r["round_tps_ratios"]))
            if "tps_ratio" in r else "| | | | | | |")
        out.append(
            f"| {names.get(r['server'], r['server'])} | {r['workload']} | {r['tool']} "
            f"| {r['tps']:.0f} ({r['tps_min']:.0f}–{r['tps_max']:.0f}) | {r['qps']:.0f} | {r['p95_ms']:.2f} "
            f"| {r['client_cpu_s']:.2f} ({r['client_user_s']:.2f}+{r['client_sys_s']:.2f}) "
            f"| {r['client_cpu_us_per_txn']:.1f} | {r['server_cpu_us_per_txn']:.0f} {ratio}")
    met = [r for r in rows if "meets_targets" in r]
    if met:
        out.append("")
        for r in met:
            out.append(f"- {names.get(r['server'], r['server'])} {r['workload']}: throughput "
                       f"{'≥' if r['tps_ratio'] >= 1 else '<'} sysbench ({r['tps_ratio']:.2f}×), "
                       f"CPU/txn {r['cpu_per_txn_ratio']:.2f}× sysbench "
                       f"({'≤' if r['cpu_per_txn_ratio'] <= 0.8 else '>'} 0.8): "
                       f"target {'met' if r['meets_targets'] else 'NOT met'} over all runs; "
                       f"met in {r['rounds_meeting_targets']} of {len(r['round_tps_ratios'])} rounds")
    return "\n".join(out)


def cmd_report(a) -> int:
    d = Path(a.outdir)
    runs = [json.loads(l) for l in (d / "runs.jsonl").read_text().splitlines() if l.strip()]
    rows = summarize(runs)
    (d / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    fields = ["server", "server_version", "workload", "tool", "runs", "time_s", "threads", "tps", "tps_min",
              "tps_max", "qps", "p95_ms", "errors", "client_cpu_s", "client_user_s", "client_sys_s",
              "client_cpu_us_per_txn", "server_cpu_us_per_txn", "tps_ratio", "cpu_per_txn_ratio",
              "p95_ratio", "meets_targets", "rounds_meeting_targets", "loadavg_before"]
    with (d / "summary.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with (d / "runs.csv").open("w", newline="") as f:
        keys = [k for k in runs[0] if k not in ("cmd", "busy_others_before", "loadavg_before")]
        w = csv.DictWriter(f, fieldnames=keys + ["load1"], extrasaction="ignore")
        w.writeheader()
        for r in runs:
            w.writerow({**r, "load1": r["loadavg_before"][0]})
    md = markdown(rows)
    (d / "table.md").write_text(md + "\n")
    print(md)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--server", choices=["mariadb", "postgres"], required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--server-pid", type=int, required=True)
    r.add_argument("--server-version", default="")
    r.add_argument("--outdir", required=True)
    r.add_argument("--loadcell", default="target/release/loadcell")
    r.add_argument("--tools", default="sysbench,loadcell")
    r.add_argument("--workloads", default="oltp_read_write,oltp_point_select")
    r.add_argument("--threads", type=int, default=8)
    r.add_argument("--tables", type=int, default=4)
    r.add_argument("--table-size", type=int, default=100000)
    r.add_argument("--time", type=int, default=30, help="seconds per measured run")
    r.add_argument("--reps", type=int, default=3, help="measured runs per tool and workload")
    r.add_argument("--warmup", type=int, default=5, help="seconds of unrecorded warm-up per tool, 0 for none")
    p = sub.add_parser("report")
    p.add_argument("outdir")
    a = ap.parse_args()
    return cmd_run(a) if a.cmd == "run" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
