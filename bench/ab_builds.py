#!/usr/bin/env python3
"""Direct A/B of two loadcell builds on one redis-server: kv.sh's flags,
6 s runs, the order swapped each round; client CPU per operation by
measure.py. Only the paired per-round ratios mean anything on a shared
machine.

    bench/ab_builds.py BEFORE_BINARY AFTER_BINARY [ROUNDS=12] [PIPELINES=1]
"""
import json, os, socket, statistics as st, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import measure

bins = {"before": sys.argv[1], "after": sys.argv[2]}
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 12
depths = [int(x) for x in (sys.argv[4] if len(sys.argv) > 4 else "1").split(",")]
out_dir = tempfile.mkdtemp(prefix="ab-builds-")
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
srv = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(1)
res = []
try:
    for depth in depths:
        for r in range(rounds):
            for b in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                out = f"{out_dir}/{b}-{depth}-{r}.json"
                cmd = [bins[b], "run", "kv", "--target", f"redis://127.0.0.1:{port}", "--threads", "2", "--clients", "25",
                       "--ratio", "1:1", "--key-maximum", "100000", "--data-size", "32", "--pipeline", str(depth),
                       "--time", "6s", "--out", out]
                m = measure(cmd, timeout=120)
                summary = json.load(open(out))["summary"]
                rec = {"build": b, "depth": depth, "round": r, "ops_per_sec": summary["ops_per_sec"],
                       "cpu_us_per_op": 1e6 * m.cpu_s / summary["ops"], "load1": os.getloadavg()[0]}
                res.append(rec)
                print(json.dumps(rec), flush=True)
                time.sleep(1)
finally:
    srv.terminate()
    srv.wait()
json.dump(res, open(f"{out_dir}/runs.json", "w"))
print("raw:", out_dir)
for depth in depths:
    for b in ("before", "after"):
        rs = [x for x in res if x["depth"] == depth and x["build"] == b]
        print(f"pipeline {depth} {b}: {st.median(x['ops_per_sec'] for x in rs):,.0f} ops/s, "
              f"{st.median(x['cpu_us_per_op'] for x in rs):.3f} us/op (medians)")
    pair = {(x["round"], x["build"]): x for x in res if x["depth"] == depth}
    for what in ("cpu_us_per_op", "ops_per_sec"):
        ratios = [pair[(r, "after")][what] / pair[(r, "before")][what] for r in range(rounds)]
        print(f"pipeline {depth} after/before {what}: {[round(x, 2) for x in ratios]} median {st.median(ratios):.3f}")
