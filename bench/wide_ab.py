#!/usr/bin/env python3
"""loadcell builds against each other and latte on PE randomRead over CQL,
on one running Cassandra whose `lc_bench` keyspace loadcell's
sequentialWrite filled and whose `latte_bench` latte's `load` filled
(bench/wide_bench.py does both), the order rotating each round:

    wide_ab.py HOST:PORT REPS LATTE NAME=BINARY[,EXTRA_ARG…] …

e.g. `wide_ab.py 127.0.0.1:9042 3 latte before=/tmp/lc-old before-w1=/tmp/lc-old,--workers,1
after=target/release/loadcell`. Client CPU per operation is the process's
rusage (startup included) over the 32,000 reads (16 sessions × 2,000 rows).
"""
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import measure  # noqa: E402

ROWS, CLIENTS = 2000, 16
host, reps, latte = sys.argv[1], int(sys.argv[2]), sys.argv[3]
tools = {name: argv.split(",") for name, argv in (a.split("=", 1) for a in sys.argv[4:])}
script = str(Path(__file__).resolve().parent / "latte" / "read.rn")
n = ROWS * CLIENTS
results: dict[str, list[tuple[float, float]]] = {}
for rep in range(reps):
    names = [*tools, "latte"]
    for name in names[rep % len(names):] + names[:rep % len(names)]:
        out = Path(f"ab-{name}-{rep}.json").resolve()
        if name == "latte":
            argv = [latte, "run", script, "-d", str(n), "--threads", "1", "--concurrency",
                    str(CLIENTS), "-P", f"rows={n}", "-P", "value_size=1000", "-o", str(out),
                    "-q", host]
            m = measure(argv, timeout=600)
            rate = json.loads(out.read_text())["result"]["cycle_throughput"]["value"]
        else:
            binary, *extra = tools[name]
            argv = [binary, "run", "randomRead", "--target", f"cql://{host}/lc_bench", "--rows",
                    str(ROWS), "--threads", str(CLIENTS), "--value-size", "1000", "--out",
                    str(out), *extra]
            m = measure(argv, timeout=600)
            rate = json.loads(out.read_text())["summary"]["ops_per_sec"]
        cpu = m.cpu_s / n * 1e6
        print(f"rep {rep} {name}: {rate:.0f} ops/s, {cpu:.1f} µs CPU/op, rc {m.returncode}, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        results.setdefault(name, []).append((rate, cpu))
for name, rs in results.items():
    rates, cpus = [r for r, _ in rs], [c for _, c in rs]
    print(f"{name}: {statistics.median(rates):.0f} ops/s ({min(rates):.0f}–{max(rates):.0f}), "
          f"{statistics.median(cpus):.1f} µs CPU/op ({min(cpus):.1f}–{max(cpus):.1f})")
