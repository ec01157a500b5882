#!/usr/bin/env python3
"""MQTT: loadcell's `mqtt-pubsub` publishers against mqtt-benchmark's, on one
Mosquitto, alternating round by round: the same clients (connections), the
same messages per client, payload size and QoS, each client closed loop with
one message in flight (mqtt-benchmark waits for each publish's token; loadcell
for its PUBACK, or its write at QoS 0), and no subscribers.

Per round and tool, for each QoS:
  mqtt-benchmark -broker tcp://H:P -clients C -count K -size S -qos Q
                 -message-interval 0 -format json -quiet
  loadcell run mqtt-pubsub --target mqtt://H:P --publishers C --subscribers 0
                 --events C*K --payload-size S --qos Q --warmup 0s --no-history

With --messages 1 this is a connection storm: every client connects at
once, publishes one message and leaves, and the table gives connects per
second (clients over wall time, start to exit), client CPU per connection
and client memory per connection: the peak RSS's growth from a run of
--baseline-clients (each tool's fixed cost) to one of --clients, over the
clients added.

Both rates are defined the same way (issue 43's rule): messages the broker
took (mqtt-benchmark's successes; loadcell's publishes) over the process's
wall time, start to exit, connects included; each tool's own steady figure
is kept beside it (mqtt-benchmark's total msgs/s; loadcell's publishes/s over
its run). Client CPU is user + sys from the process's rusage
(bench/measure.py), per message; the broker's CPU per message is read from
/proc/PID/stat around each run. Writes runs.jsonl and table.md into --outdir.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import measure, run_log  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--outdir", type=Path, required=True)
    p.add_argument("--url", required=True, help="mqtt://127.0.0.1:P")
    p.add_argument("--server-pid", type=int, required=True)
    p.add_argument("--loadcell", required=True)
    p.add_argument("--peer", required=True, help="the mqtt-benchmark binary")
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--messages", type=int, default=4000, help="per client")
    p.add_argument("--qos", default="0,1")
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--baseline-clients", type=int, default=10,
                   help="with --messages 1: the small run each tool's fixed cost is read from")
    a = p.parse_args()
    hostport = a.url.split("//", 1)[1]
    storm = a.messages == 1
    rows: list[dict] = []

    keep = run_log(a.outdir, rows)

    def record(row: dict) -> None:
        keep(row)
        log(f"  {row['tool']} qos{row['qos']}: {row['msgs_per_s']:,.0f} msg/s, "
            f"{row['cpu_us_per_msg']:.2f} us CPU/msg, broker {row['broker_us_per_msg']:.2f}, "
            f"load {row['load1']}")

    def run(tool: str, qos: int, clients: int) -> None:
        total = clients * a.messages
        if tool == "mqtt-benchmark":
            cmd = [a.peer, "-broker", f"tcp://{hostport}", "-clients", str(clients),
                   "-count", str(a.messages), "-size", str(a.size), "-qos", str(qos),
                   "-message-interval", "0", "-format", "json", "-quiet"]
        else:
            cmd = [a.loadcell, "run", "mqtt-pubsub", "--target", a.url,
                   "--publishers", str(clients), "--subscribers", "0",
                   "--events", str(total), "--payload-size", str(a.size), "--qos", str(qos),
                   "--warmup", "0s", "--no-history", "--json",
                   "--out", str(a.outdir / f"loadcell-qos{qos}-{len(rows)}.json")]
        before = proc_cpu_s(a.server_pid)
        m = measure(cmd, timeout=600)
        broker = proc_cpu_s(a.server_pid) - before
        if m.returncode != 0:
            raise RuntimeError(f"{tool} failed ({m.returncode}): {m.stderr[-3000:]}")
        if tool == "mqtt-benchmark":
            totals = json.loads(m.stdout)["totals"]
            sent = totals["successes"]
            own = totals["total_msgs_per_sec"]
        else:
            result = json.loads(m.stdout)
            sent = result["ops"]["publish"]["count"]
            own = result["ops"]["publish"]["count"] / result["summary"]["duration_s"]
        if sent != total:
            raise RuntimeError(f"{tool} sent {sent} of {total} messages")
        record({
            "tool": tool, "qos": qos, "clients": clients, "messages": sent,
            "wall_s": m.wall_s, "cpu_s": m.cpu_s, "user_s": m.user_s, "sys_s": m.sys_s,
            "maxrss_kb": m.maxrss_kb,
            "msgs_per_s": sent / m.wall_s, "own_msgs_per_s": own,
            "cpu_us_per_msg": 1e6 * m.cpu_s / sent,
            "broker_us_per_msg": 1e6 * broker / sent,
            "argv": cmd,
        })

    for rep in range(a.reps):
        for qos in [int(q) for q in a.qos.split(",")]:
            tools = ["mqtt-benchmark", "loadcell"]
            if rep % 2:
                tools.reverse()
            for tool in tools:
                log(f"round {rep + 1}/{a.reps}, qos {qos}, {tool}")
                run(tool, qos, a.clients)
                if storm:
                    run(tool, qos, a.baseline_clients)

    if storm:
        storm_table(a, rows)
        return

    lines = ["| QoS | tool | msg/s (wall) | own msg/s | client CPU µs/msg | broker CPU µs/msg |",
             "|---|---|---:|---:|---:|---:|"]
    for qos in sorted({r["qos"] for r in rows}):
        for tool in ["mqtt-benchmark", "loadcell"]:
            mine = [r for r in rows if r["qos"] == qos and r["tool"] == tool and r["clients"] == a.clients]
            med = lambda k: statistics.median(r[k] for r in mine)  # noqa: E731
            lines.append(f"| {qos} | {tool} | {med('msgs_per_s'):,.0f} | {med('own_msgs_per_s'):,.0f} "
                         f"| {med('cpu_us_per_msg'):.2f} | {med('broker_us_per_msg'):.2f} |")
    table = "\n".join(lines) + f"\n\nmedians of {a.reps} runs each; {a.clients} clients x {a.messages} messages, {a.size} B\n"
    (a.outdir / "table.md").write_text(table)
    print(table)


def storm_table(a, rows: list[dict]) -> None:
    """Connects/s, CPU and memory per connection, medians over the rounds."""
    lines = ["| QoS | tool | connects/s (wall) | client CPU µs/conn | client CPU µs/conn, marginal "
             "| peak RSS MiB | RSS KiB/conn, marginal |",
             "|---|---|---:|---:|---:|---:|---:|"]
    added = a.clients - a.baseline_clients
    for qos in sorted({r["qos"] for r in rows}):
        for tool in ["mqtt-benchmark", "loadcell"]:
            def med(clients: int, k: str) -> float:
                return statistics.median(r[k] for r in rows
                                         if r["qos"] == qos and r["tool"] == tool
                                         and r["clients"] == clients)
            big, small = a.clients, a.baseline_clients
            lines.append(
                f"| {qos} | {tool} | {big / med(big, 'wall_s'):,.0f} "
                f"| {1e6 * med(big, 'cpu_s') / big:.0f} "
                f"| {1e6 * (med(big, 'cpu_s') - med(small, 'cpu_s')) / added:.0f} "
                f"| {med(big, 'maxrss_kb') / 1024:.1f} "
                f"| {(med(big, 'maxrss_kb') - med(small, 'maxrss_kb')) / added:.1f} |")
    table = "\n".join(lines) + (f"\n\nmedians of {a.reps} runs each; {a.clients} clients (marginal: "
                                f"over a run of {a.baseline_clients}), each connecting at once and "
                                f"publishing one {a.size} B message\n")
    (a.outdir / "table.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
