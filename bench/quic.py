#!/usr/bin/env python3
"""bench/quic.py — the measuring half of bench/quic (issue 44 item 6).

Two QUIC bulk transfers on loopback, alternating, each with a server and a client process:
  quinn  — bench/quic-ref: quinn's own tokio driver both ends, one stream, 1 GB downloaded
           in the QUIC performance protocol;
  netsweep — `netsweep serve` and `netsweep run -t quic -p stream --sizes 1m` (trials of
           0.5 s, at least 5): quinn-proto
           driven by netsweep both ends, one stream.
Throughput is what the receiver got per second (quinn: bytes over the client's transfer
time; netsweep: its receiver Mbit/s, the mean over the point's trials). CPU is both
processes' user+system time over the run (/proc/PID/stat for the server, rusage for the
client) divided by the bytes moved: CPU seconds per GB, handshakes and start-up included for
both. Writes docs/quic-performance.md. Only 127.0.0.1 is used; every process is bounded by
a timeout and the servers are stopped by their own process id.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSWEEP = os.path.join(ROOT, "target/release/netsweep")
REF = os.path.join(ROOT, "bench/quic-ref/target/release/quic-ref")
TICK = os.sysconf("SC_CLK_TCK")
BYTES = 1_000_000_000


def log(msg):
    print(f"[quic {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def start(cmd, from_stderr=False):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = (p.stderr if from_stderr else p.stdout).readline()
    return p, line


def stop(p):
    p.kill()
    p.wait(timeout=10)


def quinn_round():
    srv, addr = start([REF, "server", "127.0.0.1:0"])
    try:
        s0, c0 = proc_cpu(srv.pid), child_cpu()
        out = subprocess.run([REF, "client", addr.strip(), str(BYTES)], capture_output=True,
                             text=True, timeout=120, check=True)
        s1, c1 = proc_cpu(srv.pid), child_cpu()
    finally:
        stop(srv)
    v = json.loads(out.stdout)
    assert v["bytes"] == BYTES, v
    # A download: the server sends.
    return {"gbps": v["bytes"] * 8 / v["seconds"] / 1e9,
            "sender_cpu_per_gb": (s1 - s0) / (v["bytes"] / 1e9),
            "receiver_cpu_per_gb": (c1 - c0) / (v["bytes"] / 1e9)}


def netsweep_round(tmp):
    srv, first = start([NETSWEEP, "serve", "--port", "0"], from_stderr=True)
    try:
        # "netsweep serve: listening on [::]:PORT (…"
        port = int(first.split("listening on ")[1].split(" ")[0].rsplit(":", 1)[1])
        out = os.path.join(tmp, "quic.json")
        s0, c0 = proc_cpu(srv.pid), child_cpu()
        subprocess.run([NETSWEEP, "run", f"127.0.0.1:{port}", "-t", "quic", "-p", "stream",
                        "--sizes", "1m", "--trial-time", "0.5s", "--max-point-time", "10",
                        "--min-trials", "5",
                        "-q", "-o", out], capture_output=True, text=True, timeout=120,
                       check=True)
        s1, c1 = proc_cpu(srv.pid), child_cpu()
    finally:
        stop(srv)
    with open(out) as f:
        v = json.load(f)
    p = v["points"][0]
    moved = p["server"]["bytes_received"]
    # -p stream: the client sends.
    return {"gbps": p["receiver_mbps"]["mean"] / 1000,
            "sender_cpu_per_gb": (c1 - c0) / (moved / 1e9),
            "receiver_cpu_per_gb": (s1 - s0) / (moved / 1e9)}


def spread(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs/quic-performance.md"))
    a = ap.parse_args()
    runs = {"quinn": [], "netsweep": []}
    with tempfile.TemporaryDirectory(prefix="netsweep-quic-bench-") as tmp:
        for r in range(a.rounds):
            order = ["quinn", "netsweep"] if r % 2 == 0 else ["netsweep", "quinn"]
            for tool in order:
                res = quinn_round() if tool == "quinn" else netsweep_round(tmp)
                log(f"round {r + 1} {tool}: {res['gbps']:.2f} Gbit/s, CPU s/GB sender "
                    f"{res['sender_cpu_per_gb']:.2f} receiver {res['receiver_cpu_per_gb']:.2f}")
                runs[tool].append(res)
    med = {t: statistics.median(x["gbps"] for x in rs) for t, rs in runs.items()}
    ratio = med["netsweep"] / med["quinn"]
    rows = []
    for t, rs in runs.items():
        rows.append(f"| {t} | {spread([x['gbps'] for x in rs])} | "
                    f"{spread([x['sender_cpu_per_gb'] for x in rs])} | "
                    f"{spread([x['receiver_cpu_per_gb'] for x in rs])} |")
    ratios = [n["gbps"] / q["gbps"] for n, q in zip(runs["netsweep"], runs["quinn"])]
    doc = f"""# QUIC performance: netsweep's QUIC against quinn driving itself

Written by `bench/quic` on {time.strftime('%Y-%m-%d %H:%M')} ({platform.node()}, {os.cpu_count()} CPUs,
Linux {platform.release()}); {a.rounds} rounds, alternating, medians with min–max. Loopback only.

Issue 44 asks that netsweep not be the bottleneck of its own QUIC measurements: bulk QUIC
throughput at least that of the same stack's own driver, with both ends' CPU. netsweep drives
quinn-proto 0.11.19 itself (`crates/netsweep-transport/src/quic/`); the reference is
`bench/quic-ref`, quinn 0.11.12 on its own tokio driver with the same quinn-proto and its
default settings, downloading {BYTES // 10**9} GB on one stream in the QUIC performance protocol.
netsweep: `netsweep serve` and `netsweep run -t quic -p stream --sizes 1m --trial-time 0.5s
--min-trials 5` (one stream, the client sending; receiver Mbit/s averaged over the point's
trials). CPU is each process's user+system time over the whole run per GB moved (start-up and
handshakes included, for both); the sender is quinn's server and netsweep's client.

| stack | Gbit/s | sender CPU s/GB | receiver CPU s/GB |
|---|---|---|---|
{chr(10).join(rows)}

**Ratio netsweep ÷ quinn (throughput, medians): {ratio:.2f}** (per round: {", ".join(f"{r:.2f}" for r in ratios)}).

Both send at most 1452-byte UDP payloads (quinn's MTU-discovery ceiling) with GSO; netsweep
also receives coalesced (UDP_GRO), as quinn's UDP layer does. netsweep's figure is the mean of
its trials (the gaps between them excluded, its window already open); quinn's is one transfer
from the connection's start, slow start included. Rerun: `bench/quic`.
"""
    with open(a.out, "w") as f:
        f.write(doc)
    log(f"ratio {ratio:.2f}; wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
