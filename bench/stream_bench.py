#!/usr/bin/env python3
"""Kafka: loadcell's `stream` workload against Kafka's own ProducerPerformance
and ConsumerPerformance, alternating round by round on one broker, the same
record size (220 bytes), rows, partitions and producer settings (acks,
linger.ms, batch.size), each tool on a fresh topic.

Per round and tool: produce --rows rows into a new topic, then drain them
from the start with a new group. loadcell: `prepare stream --mode produce`
(not measured), `run stream --mode produce --events rows/batch`, then
`run stream --mode consume --group G` (a consume-only run makes its group
from the topic's start), then `cleanup`. Kafka: TopicCommand --create,
ProducerPerformance, ConsumerPerformance, TopicCommand --delete.

Client CPU is user + sys from each process's rusage (bench/measure.py),
whole process: the JVM's start and JIT for the Java tools, loadcell's
connect, checks and post-run verification. Each tool's fixed cost is one
--fixed-rows run of it per partition count; the table gives the marginal
CPU per row, (CPU - fixed CPU) / (rows - fixed rows), beside the whole.
Rates, defined alike for both tools (docs/BENCHMARKS.md's steady-state
rule): produce, rows from the first send to the last acknowledgement
(ProducerPerformance's records/sec; loadcell's produce_flow); consume,
rows from the first fetched to the last, the group join left out
(ConsumerPerformance's fetch.nMsg.sec; loadcell's consume_flow; the
tool's whole-run nMsg.sec is kept in runs.jsonl). loadcell's consume run
lasts --consume-time and goes idle once drained: that idle polling is in
its CPU.
Writes runs.jsonl and table.md into --outdir.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import measure, run_log  # noqa: E402

RECORD = 220


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--outdir", type=Path, required=True)
    p.add_argument("--url", required=True, help="kafka://127.0.0.1:P")
    p.add_argument("--lib", required=True, help="the broker's jars (Kafka's tools)")
    p.add_argument("--log4j", required=True)
    p.add_argument("--loadcell", required=True, help="the loadcell binary")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--partitions", default="1,8")
    p.add_argument("--batch", type=int, default=10_000,
                   help="loadcell's rows per produce request (waited for)")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=262_144, help="bytes, both producers")
    p.add_argument("--producers", type=int, default=1, help="loadcell's producer sessions")
    p.add_argument("--consumers", type=int, default=1, help="loadcell's consumer sessions")
    p.add_argument("--consume-time", default="20s")
    p.add_argument("--fixed-rows", type=int, default=1000,
                   help="rows of each tool's fixed-cost run (0: none)")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    host = a.url.split("//", 1)[1].split("?")[0]
    java = ["java", "-Xmx512m", f"-Dlog4j.configuration=file:{a.log4j}", "-cp", f"{a.lib}/*"]
    producer_props = {"acks": "all", "linger.ms": a.linger_ms, "batch.size": a.batch_size}
    target = a.url + "?" + "&".join(f"{k}={v}" for k, v in producer_props.items())
    rows: list[dict] = []

    keep = run_log(a.outdir, rows)

    def record(row: dict) -> None:
        keep(row)
        log(f"  {row['tool']} {row['phase']} p{row['partitions']}: {row['rows_per_s']:,.0f} rows/s, "
            f"{row['cpu_us_per_row']:.3f} us CPU/row, load {row['load1']}")

    def check(m, what: str) -> None:
        if m.returncode != 0:
            raise RuntimeError(f"{what} failed ({m.returncode}): {m.stderr[-3000:]}{m.stdout[-2000:]}")

    def topics(verb: str, topic: str, partitions: int) -> None:
        cmd = [*java, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", host,
               f"--{verb}", "--topic", topic]
        if verb == "create":
            cmd += ["--partitions", str(partitions), "--replication-factor", "1"]
        check(measure(cmd), f"TopicCommand --{verb}")

    def kafka_tools(partitions: int, rep, n: int) -> None:
        topic = f"perf-p{partitions}-{rep}"
        topics("create", topic, partitions)
        produce = measure([*java, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                           "--num-records", str(n), "--record-size", str(RECORD),
                           "--throughput", "-1", "--producer-props",
                           *(f"{k}={v}" for k, v in producer_props.items()),
                           f"bootstrap.servers={host}"])
        check(produce, "ProducerPerformance")
        # Its last line: "N records sent, R records/sec (M MB/sec), ...":
        # from its first send to its last acknowledgement.
        own = float(re.findall(r"records sent, ([\d.]+) records/sec", produce.stdout)[-1])
        record({"tool": "kafka-tools", "phase": "produce", "partitions": partitions, "rep": rep,
                "rows": n, "rows_per_s": own, "wall_s": produce.wall_s,
                "cpu_s": produce.cpu_s, "cpu_us_per_row": produce.cpu_s * 1e6 / n})
        consume = measure([*java, "org.apache.kafka.tools.ConsumerPerformance",
                           "--bootstrap-server", host, "--topic", topic, "--messages", str(n),
                           "--group", f"perf-{topic}", "--timeout", "60000"])
        check(consume, "ConsumerPerformance")
        # CSV: start.time, end.time, MB, MB.sec, nMsg, nMsg.sec,
        # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec.
        # fetch.nMsg.sec leaves the group join out, as loadcell's
        # consume_flow does: the rate compared. nMsg.sec is kept beside it.
        csv = [line for line in consume.stdout.splitlines()
               if re.match(r"\d{4}-\d\d-\d\d", line) and line.count(",") >= 9]
        fields = [f.strip() for f in csv[-1].split(",")]
        record({"tool": "kafka-tools", "phase": "consume", "partitions": partitions, "rep": rep,
                "rows": int(fields[4]), "rows_per_s": float(fields[9]),
                "whole_rows_per_s": float(fields[5]), "join_ms": float(fields[6]),
                "wall_s": consume.wall_s, "cpu_s": consume.cpu_s,
                "cpu_us_per_row": consume.cpu_s * 1e6 / n})
        topics("delete", topic, partitions)

    def loadcell(partitions: int, rep, n: int) -> None:
        topic = f"lc-p{partitions}-{rep}"
        shape = ["--target", target, "--stream", topic, "--partitions", str(partitions)]
        check(measure([a.loadcell, "prepare", "stream", *shape, "--mode", "produce"]),
              "loadcell prepare")
        out = a.outdir / f"{topic}-produce.json"
        batch = min(a.batch, n)
        m = measure([a.loadcell, "run", "stream", *shape, "--mode", "produce",
                     "--producers", str(a.producers), "--batch", str(batch),
                     "--events", str(n // batch), "--out", str(out)])
        check(m, "loadcell produce")
        r = json.loads(out.read_text())
        produced = r["verification"]["stream"]["produced"]
        # Rows over the time they flowed, first batch sent to last
        # acknowledged, as ProducerPerformance's figure.
        # (A fixed-cost run's single batch or poll may span no time: 0.)
        flow = r["verification"]["stream"].get("produce_flow") or {"per_sec": 0.0}
        record({"tool": "loadcell", "phase": "produce", "partitions": partitions, "rep": rep,
                "rows": produced, "rows_per_s": flow["per_sec"], "wall_s": m.wall_s,
                "cpu_s": m.cpu_s, "cpu_us_per_row": m.cpu_s * 1e6 / produced})
        out = a.outdir / f"{topic}-consume.json"
        # A fixed-cost run drains in well under a second: a short run
        # keeps its idle polling out of the fixed cost (and in the
        # marginal cost of the full runs, against loadcell).
        time_s = "3s" if rep == "fixed" else a.consume_time
        m = measure([a.loadcell, "run", "stream", *shape, "--mode", "consume",
                     "--group", f"lc-{topic}", "--consumers", str(a.consumers),
                     "--time", time_s, "--report-interval", "200ms", "--out", str(out)])
        check(m, "loadcell consume")
        r = json.loads(out.read_text())
        consumed = r["verification"]["stream"]["consumed"]
        if consumed != produced or not r["verification"]["ok"]:
            raise RuntimeError(f"loadcell consumed {consumed} of {produced}: {r['verification']}")
        # Rows over the time they flowed, first row to last (not whole
        # report intervals that carried rows).
        flow = r["verification"]["stream"].get("consume_flow") or {"per_sec": 0.0}
        record({"tool": "loadcell", "phase": "consume", "partitions": partitions, "rep": rep,
                "rows": consumed, "rows_per_s": flow["per_sec"], "wall_s": m.wall_s,
                "cpu_s": m.cpu_s, "cpu_us_per_row": m.cpu_s * 1e6 / consumed})
        # The consume run's group members may still be in the group until
        # the broker's session timeout (10 s): cleanup refuses a non-empty group.
        cleanup = [a.loadcell, "cleanup", "stream", "--target", target, "--stream", topic,
                   "--group", f"lc-{topic}"]
        for _ in range(4):
            m = measure(cleanup)
            if m.returncode == 0 or "NonEmptyGroup" not in m.stderr:
                break
            time.sleep(5)
        check(m, "loadcell cleanup")

    tools = [kafka_tools, loadcell]
    configs = [int(n) for n in a.partitions.split(",")]
    for partitions in configs:
        # Each tool's fixed cost (process start, JIT, connections, group
        # join): one tiny run, whose CPU is taken from each full run's
        # for the marginal CPU per row.
        if a.fixed_rows:
            for tool in tools:
                log(f"{tool.__name__} p{partitions} fixed cost ({a.fixed_rows} rows)")
                tool(partitions, "fixed", a.fixed_rows)
        for rep in range(a.reps):
            shift = rep % len(tools)
            for tool in tools[shift:] + tools[:shift]:
                log(f"{tool.__name__} p{partitions} rep {rep}")
                tool(partitions, rep, a.rows)

    lines = [f"{a.rows} rows of {RECORD} bytes a run; producers: "
             + ", ".join(f"{k}={v}" for k, v in producer_props.items())
             + f"; loadcell --batch {a.batch}, --producers {a.producers}, "
             f"--consumers {a.consumers}; "
             f"medians of {a.reps} rounds [min–max]; marginal: (CPU − the {a.fixed_rows}-row "
             "run's CPU) ÷ the rows between", "",
             "| partitions | tool | phase | rows/s | client CPU µs/row | marginal µs/row "
             "| fixed cost (CPU s) | load average |",
             "|---:|---|---|---:|---:|---:|---:|---:|"]
    def key_of(r: dict) -> tuple:
        return r["partitions"], r["phase"], r["tool"]

    fixed_of = {key_of(r): r for r in rows if r["rep"] == "fixed"}
    full = [r for r in rows if r["rep"] != "fixed"]
    for key in sorted({key_of(r) for r in full}):
        partitions, phase, tool = key
        rs = [r for r in full if key_of(r) == key]
        rate = [r["rows_per_s"] for r in rs]
        cpu = [r["cpu_us_per_row"] for r in rs]
        f = fixed_of.get(key)
        if f:
            marginal = [(r["cpu_s"] - f["cpu_s"]) * 1e6 / (r["rows"] - f["rows"]) for r in rs]
            margin = (f"{statistics.median(marginal):.3f} [{min(marginal):.3f}–{max(marginal):.3f}]"
                      f" | {f['cpu_s']:.2f}")
        else:
            margin = "– | –"
        lines.append(f"| {partitions} | {tool} | {phase} | "
                     f"{statistics.median(rate):,.0f} [{min(rate):,.0f}–{max(rate):,.0f}] | "
                     f"{statistics.median(cpu):.3f} [{min(cpu):.3f}–{max(cpu):.3f}] | {margin} | "
                     f"{min(r['load1'] for r in rs):.1f}–{max(r['load1'] for r in rs):.1f} |")
    (a.outdir / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
