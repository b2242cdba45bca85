#!/usr/bin/env python3
"""Markdown tables of a seed scenario's results, for docs/experiments/<seed>/tables.md.

    tables.py SEED OUT...   SEED is 000 (its AF_XDP part; every other seed has a generated page); OUT are the scenario output
                            directories (`netsweep scenario run FILE -o OUT`), named by file stem.
Reads only the results JSON files; prints Markdown on stdout.
"""
import json
import os
import sys


def load(out, name):
    with open(os.path.join(out, name + ".json")) as f:
        return json.load(f)


def fmt(x, nd=1):
    return "–" if x is None else f"{x:,.{nd}f}".replace(",", " ")


def est(p, key):
    v = p.get(key)
    return None if not v else v.get("mean")


def half_rtt_us(p):
    lat = p.get("latency")
    return None if not lat else lat["half_rtt_ns"]["p50"] / 1e3


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def seed000(dirs):
    return seed000_xdp(dirs["000-xdp"])


def seed000_xdp(out):
    """The last layer stripped: AF_XDP beside AF_PACKET and udp+gso (scenarios/seeds/000-xdp.toml)."""
    s = "\n### The last layer stripped: AF_XDP (unshaped veth, MTU 1500, client CPU 0, server CPU 1)\n\n"
    rows = []
    for name in ["xdp-small", "xdp-busy-small", "packet-mmsg-small", "packet-small", "udp-gso-small"]:
        run = load(out, name)
        for p in run["points"]:
            loss = p.get("loss") or {}
            rx = est(p, "receiver_mbps")
            pps = None if rx is None else rx * 1e6 / 8 / p["size"]
            drops = p["server"].get("socket_drops") or 0
            rows.append([name, str(p["size"]), fmt(pps, 0), fmt(rx),
                         fmt(100 * loss.get("ratio", 0), 2) + " %", str(drops)])
    s += table(["run", "size (B)", "receiver frames/s", "receiver Mbit/s", "loss",
                "receiving socket's drops"], rows)
    x = load(out, "xdp-small")["granted"]
    modes = ", ".join(f"{side}: XDP {x[side]['xdp']['attach']}, {x[side]['xdp']['bind']} mode"
                      for side in ["client", "server"] if x.get(side, {}).get("xdp"))
    s += f"\nxdp path as granted: {modes}.\n\n"
    rows = []
    for a, b in zip(load(out, "xdp-pingpong")["points"], load(out, "packet-pingpong")["points"]):
        rows.append([str(a["size"]), fmt(half_rtt_us(a), 1), fmt(half_rtt_us(b), 1)])
    s += table(["size (B)", "xdp RTT/2 p50 (µs)", "packet RTT/2 p50 (µs)"], rows)
    return s


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dirs = {os.path.basename(os.path.normpath(d)): d for d in sys.argv[2:]}
    print({"000": seed000}[sys.argv[1]](dirs), end="")


if __name__ == "__main__":
    main()
