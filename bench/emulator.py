#!/usr/bin/env python3
"""bench/emulator.py — the lab's path emulator's ceiling (issue 30): how many frames per second
and bits per second it carries, at 1500- and 9000-byte MTUs, against the same veth path without
it. Not part of ./run-tests; run it as root under the benchmark lock:

    cargo build --release
    flock /tmp/netsweep-bench.lock python3 bench/emulator.py [--runs 3] [--out FILE]

For each MTU it runs one scenario (`netsweep scenario run`) whose lab has two links between a
client and a server: one through an emulator that does nothing (`[links.emulate]` empty: the
pure cost of carrying frames), one through an emulator with a 1 ms delay (the cost of holding
them), and a plain veth. A UDP stream of the largest datagram the MTU carries, and one of
64-byte datagrams, cross each, three 1 s trials; the figure is the receiver's rate, median over
rounds with min–max, beside the emulator's own counts (what it dropped because the kernel had to
drop before it could read: it was saturated). Prints a markdown table; --out writes it to a file.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSWEEP = os.path.join(ROOT, "target", "release", "netsweep")
LINKS = (("passthrough", "[topology.links.emulate]\n"),
         ("delay-1ms", "[topology.links.emulate]\ndelay = \"1ms\"\n"),
         ("plain", ""))


def scenario(mtu, sizes):
    """A scenario: three links client–server (emulated, delayed, plain), a stream per size and
    link."""
    t = [f'name = "emulator-{mtu}"', "[topology]",
         '[[topology.hosts]]\nname = "client"', '[[topology.hosts]]\nname = "server"']
    for i, (name, emulate) in enumerate(LINKS):
        t.append(f'[[topology.links]]\nname = "{name}"\na = "client"\nb = "server"\nmtu = {mtu}\n'
                 f'subnet = "198.18.{60 + i}.0/24"\n{emulate}')
    for i, (name, _) in enumerate(LINKS):
        for size in sizes:
            t.append(f'[[run]]\nname = "{name}-{size}"\nclient = "client"\nserver = "server"\n'
                     f'via = "{name}"\nargs = ["-t", "udp", "-p", "stream", "--sizes", "{size}", '
                     f'"--no-warmup", "--trial-time", "1s", "--min-trials", "3", '
                     f'"--max-trials", "3", "--max-point-time", "10s"]\ntimeout = 120')
    return "\n\n".join(t) + "\n"


def one(mtu, sizes, keep):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.toml")
        with open(path, "w") as f:
            f.write(scenario(mtu, sizes))
        out = os.path.join(keep or d, f"emu-{mtu}")
        subprocess.run([NETSWEEP, "scenario", "run", path, "-o", out], check=True,
                       stdout=subprocess.DEVNULL, timeout=900)
        rows = {}
        for name, _ in LINKS:
            for size in sizes:
                with open(os.path.join(out, f"{name}-{size}.json")) as f:
                    r = json.load(f)
                p = r["points"][0]
                rx = p["receiver_mbps"]["mean"]
                dur = p["elapsed_ns"] / 1e9
                fps = p["loss"]["received"] / (p["trials"] * 1.0) if p.get("loss") else 0
                emu = next((e for e in r.get("lab", {}).get("emulators", [])
                            if e["link"] == name), None)
                kdrop = emu["directions"][0]["counters"]["dropped_kernel"] if emu else None
                rows[(name, size)] = (rx, fps, kdrop, dur)
        return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--keep", help="keep each run's results under this directory")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/emulator.py needs root (network namespaces)")
    plan = {1500: (64, 1472), 9000: (64, 8972)}
    book = {}
    for _ in range(a.runs):
        for mtu, sizes in plan.items():
            for k, v in one(mtu, sizes, a.keep).items():
                book.setdefault((mtu,) + k, []).append(v)
    lines = ["| MTU | path | datagram | receiver Mbit/s (median, min–max) | frames/s (median) "
             "| emulator's kernel drops |",
             "|---|---|---|---|---|---|"]
    for (mtu, name, size), vals in sorted(book.items()):
        rx = [v[0] for v in vals]
        fps = statistics.median(v[1] for v in vals)
        kd = [v[2] for v in vals if v[2] is not None]
        lines.append(f"| {mtu} | {name} | {size} B | {statistics.median(rx):.0f} "
                     f"({min(rx):.0f}–{max(rx):.0f}) | {fps:,.0f} | "
                     f"{statistics.median(kd) if kd else '—'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
