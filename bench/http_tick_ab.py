#!/usr/bin/env python3
"""loadcell builds or flag sets against k6 at one fixed rate, alternating round by round.

    LC=target/release/loadcell bench/http_tick_ab.py PORT RATE SECONDS ROUNDS \
        "name=loadcell flags;other=flags;k6"

Each `name=flags` runs `$LC run http --target http://127.0.0.1:PORT/index.html
--time SECONDSs --rate RATE flags` (a name `X` whose environment variable LC_X
is set runs that binary instead); `k6` runs a constant-arrival-rate scenario
at RATE with 100 VUs. CPU per request is the whole process's rusage (user +
sys, start-up included) over the requests answered, for every tool alike.
Outputs go to $OUT (default /tmp/http_tick_ab).
"""
import json, os, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import measure
port, rate, secs, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
variants = sys.argv[5].split(";")   # each: name=extra flags for loadcell, or k6
lc = os.environ.get("LC", "target/release/loadcell")
url = f"http://127.0.0.1:{port}/index.html"
out = os.environ.get("OUT", "/tmp/http_tick_ab"); os.makedirs(out, exist_ok=True)
k6js = f"{out}/k6.js"; summ = f"{out}/k6-summary.json"
open(k6js, "w").write(f"""import http from 'k6/http';
export const options = {{ discardResponseBodies: true, summaryTrendStats: ['p(50)','p(99)'],
  scenarios: {{ fixed: {{ executor: 'constant-arrival-rate', rate: {rate}, timeUnit: '1s',
    duration: '{secs}s', preAllocatedVUs: 100, maxVUs: 100 }} }} }};
export default function () {{ http.get('{url}'); }}
export function handleSummary(d) {{ return {{ '{summ}': JSON.stringify(d) }}; }}
""")
rows = {}
for rep in range(reps):
    order = variants[rep % len(variants):] + variants[:rep % len(variants)]
    for v in order:
        name, _, flags = v.partition("=")
        load = os.getloadavg()[0]
        if name == "k6":
            m = measure([os.path.expanduser("~/go/bin/k6"), "run", "--quiet", "--no-color", k6js])
            j = json.load(open(summ))["metrics"]
            n = j["http_reqs"]["values"]["count"]; r = j["http_reqs"]["values"]["rate"]
            cpu = m.cpu_s * 1e6 / n; p50 = j["http_req_duration"]["values"]["p(50)"]
            extra = f"dropped {j.get('dropped_iterations',{}).get('values',{}).get('count',0)}"
        else:
            res = f"{out}/lc.json"
            binary = os.environ.get(f"LC_{name}", lc)
            cmd = [binary, "run", "http", "--target", url, "--time", f"{secs}s", "--rate", str(rate),
                   "--out", res] + flags.split()
            m = measure(cmd)
            if m.returncode: print(m.stderr[-500:]); sys.exit(1)
            s = json.load(open(res))["summary"]
            r = s["events_per_sec"]
            cc = s["client_cpu"]
            cpu_meas = round((cc["user_s"] + cc["sys_s"]) * 1e6 / s["events"], 2)
            cpu = m.cpu_s * 1e6 / s["events"]
            p50 = None
            extra = f"measured-phase {cpu_meas}"
        rows.setdefault(name, []).append(cpu)
        print(f"rep {rep} {name}: {r:.0f}/s cpu {cpu:.2f} us/req load {load:.1f} {extra}", flush=True)
for k, v in rows.items():
    print(k, "median", round(statistics.median(v), 2), [round(x, 2) for x in v])
