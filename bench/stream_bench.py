#!/usr/bin/env python3
"""Kafka: loadcell's Kafka driver (bench/kafka_rows.rs), loadcell's `stream`
workload (when given a command) and Kafka's own ProducerPerformance and
ConsumerPerformance, alternating on one broker, the same record size (220
bytes), rows and partitions, each on a fresh topic.

Client CPU is user + sys from the child's rusage (bench/measure.py): for
the JVM tools that includes the JVM's start and JIT, which is why runs are
long (BENCH_ROWS); kafka_rows reports its produce and consume phases apart
from getrusage in-process. Writes runs.jsonl and table.md into --outdir.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import measure  # noqa: E402

RECORD = 220


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--outdir", type=Path, required=True)
    p.add_argument("--url", required=True, help="kafka://127.0.0.1:P")
    p.add_argument("--lib", required=True, help="the broker's jars (Kafka's tools)")
    p.add_argument("--kafka-rows", required=True, help="the kafka_rows example")
    p.add_argument("--log4j", required=True)
    p.add_argument("--loadcell-cmd", default="",
                   help="loadcell's stream run, with {url} {topic} {rows} {partitions} {out}")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--partitions", default="1,8")
    p.add_argument("--batch", type=int, default=5000, help="kafka_rows' rows per produce")
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    host = a.url.split("//", 1)[1].split("?")[0]
    java = ["java", "-Xmx512m", f"-Dlog4j.configuration=file:{a.log4j}", "-cp", f"{a.lib}/*"]
    rows: list[dict] = []

    def record(row: dict) -> None:
        rows.append(row)
        with open(a.outdir / "runs.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        log(f"  {row['tool']} {row['phase']} p{row['partitions']}: {row['rows_per_s']:,.0f} rows/s, "
            f"{row['cpu_us_per_row']:.3f} us CPU/row")

    def check(m, what: str) -> None:
        if m.returncode != 0:
            raise RuntimeError(f"{what} failed ({m.returncode}): {m.stderr[-3000:]}{m.stdout[-2000:]}")

    def topics(verb: str, topic: str, partitions: int) -> None:
        cmd = [*java, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", host,
               f"--{verb}", "--topic", topic]
        if verb == "create":
            cmd += ["--partitions", str(partitions), "--replication-factor", "1"]
        check(measure(cmd), f"TopicCommand --{verb}")

    def kafka_rows(partitions: int, rep: int) -> None:
        m = measure([a.kafka_rows, a.url, str(a.rows), str(partitions), str(a.batch)])
        check(m, "kafka_rows")
        for line in m.stdout.splitlines():
            r = json.loads(line)
            record({"tool": "loadcell-driver", "phase": r["phase"], "partitions": partitions,
                    "rep": rep, "rows": r["rows"], "rows_per_s": r["rows_per_s"],
                    "cpu_us_per_row": r["cpu_us_per_row"], "wall_s": r["wall_s"]})

    def kafka_tools(partitions: int, rep: int) -> None:
        topic = f"perf-p{partitions}-{rep}"
        topics("create", topic, partitions)
        produce = measure([*java, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                           "--num-records", str(a.rows), "--record-size", str(RECORD),
                           "--throughput", "-1", "--producer-props", "acks=all",
                           f"bootstrap.servers={host}"])
        check(produce, "ProducerPerformance")
        # Its last line: "N records sent, R records/sec (M MB/sec), ...".
        own = float(re.findall(r"records sent, ([\d.]+) records/sec", produce.stdout)[-1])
        record({"tool": "kafka-tools", "phase": "produce", "partitions": partitions, "rep": rep,
                "rows": a.rows, "rows_per_s": own, "wall_s": produce.wall_s,
                "cpu_us_per_row": produce.cpu_s * 1e6 / a.rows})
        consume = measure([*java, "org.apache.kafka.tools.ConsumerPerformance",
                           "--bootstrap-server", host, "--topic", topic, "--messages", str(a.rows),
                           "--group", f"perf-{topic}", "--timeout", "60000"])
        check(consume, "ConsumerPerformance")
        # CSV: start.time, end.time, MB, MB.sec, nMsg, nMsg.sec, ...
        csv = [line for line in consume.stdout.splitlines()
               if re.match(r"\d{4}-\d\d-\d\d", line) and line.count(",") >= 5]
        fields = csv[-1].split(",")
        record({"tool": "kafka-tools", "phase": "consume", "partitions": partitions, "rep": rep,
                "rows": int(fields[4].strip()), "rows_per_s": float(fields[5]),
                "wall_s": consume.wall_s, "cpu_us_per_row": consume.cpu_s * 1e6 / a.rows})
        topics("delete", topic, partitions)

    def loadcell(partitions: int, rep: int) -> None:
        topic = f"lc-p{partitions}-{rep}"
        out = a.outdir / f"{topic}.json"
        cmd = a.loadcell_cmd.format(url=a.url, topic=topic, rows=a.rows, partitions=partitions,
                                    out=out).split()
        m = measure(cmd)
        check(m, "loadcell")
        (a.outdir / f"{topic}.out").write_text(m.stdout + m.stderr)
        record({"tool": "loadcell", "phase": "produce+consume", "partitions": partitions,
                "rep": rep, "rows": a.rows, "rows_per_s": a.rows / m.wall_s, "wall_s": m.wall_s,
                "cpu_us_per_row": m.cpu_s * 1e6 / a.rows})

    tools = [kafka_rows, kafka_tools] + ([loadcell] if a.loadcell_cmd else [])
    configs = [int(n) for n in a.partitions.split(",")]
    for partitions in configs:
        for rep in range(a.reps):
            shift = rep % len(tools)
            for tool in tools[shift:] + tools[:shift]:
                log(f"{tool.__name__} p{partitions} rep {rep}")
                tool(partitions, rep)

    lines = [f"{a.rows} rows of {RECORD} bytes a run; medians of {a.reps} runs", "",
             "| partitions | tool | phase | rows/s | client CPU µs/row |", "|---:|---|---|---:|---:|"]
    keys = sorted({(r["partitions"], r["tool"], r["phase"]) for r in rows})
    for partitions, tool, phase in keys:
        rs = [r for r in rows if (r["partitions"], r["tool"], r["phase"]) == (partitions, tool, phase)]
        lines.append(f"| {partitions} | {tool} | {phase} | "
                     f"{statistics.median(r['rows_per_s'] for r in rs):,.0f} | "
                     f"{statistics.median(r['cpu_us_per_row'] for r in rs):.3f} |")
    (a.outdir / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
