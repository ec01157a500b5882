#!/usr/bin/env python3
"""Run one command and measure it: its stdout, the CPU it used, and wall time.

CPU is user + sys from the rusage that os.wait4 returns for the child, which
includes every descendant the child waited for (so a wrapper script counts its
children). Wall time is from just before fork to when wait4 returns.

As a module:

    from measure import measure
    m = measure(["sysbench", "--version"])
    m.stdout, m.cpu_s, m.user_s, m.sys_s, m.wall_s, m.returncode

As a command (prints one JSON object on stdout; the child's stdout goes into it,
its stderr passes through):

    bench/measure.py [--timeout S] [--threads] -- COMMAND [ARG...]

With --threads (threads=True), the child's threads are read from /proc every
100 ms, and thread_cpu_s gives the CPU of each thread name (summed over the
threads of that name) as last seen before it exited: what one thread, such as
loadcell's export thread, costs, apart from the noise in the rest.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time


@dataclasses.dataclass
class Measurement:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kb: int
    timed_out: bool = False
    thread_cpu_s: dict | None = None

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["cpu_s"] = self.cpu_s
        return d


def measure(argv: list[str], timeout: float | None = None, env: dict | None = None,
            stderr_passthrough: bool = False, cwd: str | None = None,
            threads: bool = False) -> Measurement:
    """Run argv to completion; return its output, rusage CPU and wall time.

    stdout and stderr are spooled to temp files (no pipe to drain while we sit in
    wait4). With stderr_passthrough the child's stderr is this process's stderr.
    On timeout the child gets SIGTERM, then SIGKILL 10 s later; CPU is still
    measured and timed_out is set.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=None if stderr_passthrough else err,
                                env=env, cwd=cwd)
        timed_out = threading.Event()
        timer = None
        if timeout is not None:
            def expire() -> None:
                timed_out.set()
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                    for _ in range(100):
                        time.sleep(0.1)
                        if proc.returncode is not None:
                            return
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            timer = threading.Timer(timeout, expire)
            timer.daemon = True
            timer.start()
        seen: dict[str, tuple[str, int]] = {}  # tid -> (name, ns on a CPU)
        if threads:
            def sample() -> None:
                task = f"/proc/{proc.pid}/task"
                while proc.returncode is None:
                    try:
                        for tid in os.listdir(task):
                            with open(f"{task}/{tid}/comm") as f:
                                name = f.read().strip()
                            # Time on a CPU, in ns (stat's ticks are 10 ms).
                            with open(f"{task}/{tid}/schedstat") as f:
                                seen[tid] = (name, int(f.read().split()[0]))
                    except (FileNotFoundError, ProcessLookupError, ValueError):
                        pass
                    time.sleep(0.1)
            threading.Thread(target=sample, daemon=True).start()
        while True:
            try:
                _, status, ru = os.wait4(proc.pid, 0)
                break
            except InterruptedError:
                continue
        wall = time.monotonic() - t0
        if timer is not None:
            timer.cancel()
        # We reaped it ourselves: tell Popen so it doesn't try again.
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measurement(
            argv=list(argv),
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr="" if stderr_passthrough else err.read().decode("utf-8", "replace"),
            wall_s=wall,
            user_s=ru.ru_utime,
            sys_s=ru.ru_stime,
            maxrss_kb=ru.ru_maxrss,
            timed_out=timed_out.is_set(),
            thread_cpu_s=_by_name(seen) if threads else None,
        )


def run_log(outdir, rows: list[dict]):
    """A recorder of a benchmark's runs: each row gets the 1-minute load
    average, joins `rows` and is appended to OUTDIR/runs.jsonl."""
    def keep(row: dict) -> dict:
        row["load1"] = os.getloadavg()[0]
        rows.append(row)
        with open(os.path.join(outdir, "runs.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        return row
    return keep


def _by_name(seen: dict[str, tuple[str, int]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, ns in seen.values():
        out[name] = out.get(name, 0.0) + ns / 1e9
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=None, help="seconds before SIGTERM")
    ap.add_argument("--threads", action="store_true", help="CPU by thread name too")
    ap.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command given")
    m = measure(cmd, timeout=a.timeout, stderr_passthrough=True, threads=a.threads)
    json.dump(m.to_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if m.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
