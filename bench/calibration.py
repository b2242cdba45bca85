#!/usr/bin/env python3
"""bench/calibration.py — are netsweep's intervals and comparisons calibrated? (issue 39 item 2)
Not part of ./run-tests; run it on an idle host under the benchmark lock:

    flock /tmp/netsweep-bench.lock python3 bench/calibration.py aa [--pairs 10] [-- RUN ARGS...]
    flock /tmp/netsweep-bench.lock python3 bench/calibration.py coverage [--later 5] [-- RUN ARGS...]
    flock /tmp/netsweep-bench.lock python3 bench/calibration.py ab [--pairs 5] [-- RUN ARGS...]

Needs target/release/netsweep (cargo build --release). RUN ARGS are what `netsweep run` is given
(default: nothing, the default loopback sweep); every run writes its results under
target/bench/calibration/.

aa        PAIRS pairs of identical runs, one straight after the other, each pair through
          `netsweep compare --format json`: the share of paired points flagged different (the
          target is at most 5%), and per pair the median change with its interval. Also the
          95th percentile of |B ÷ A − 1| over every paired point: the drift re-runs show, which
          is what compare's --noise default must be at least.
coverage  one run, then LATER more of the same command: for each point, whether the median of
          the later runs' means lies inside the first run's 95% interval (the target is at
          least 90% of points), for throughput and, for pingpong, latency.
ab        a known effect (root: a lab of network namespaces, `netsweep scenario run`): two links
          between one client and one server, shaped by tbf to 50 and 47 Mbit/s (a 6% effect);
          PAIRS pairs of TCP stream sweeps 64 KiB–1 MiB, A across the fast link and B across the
          slow one, each pair through `compare`: the share of paired points flagged "B slower"
          (the target is at least 90%). RUN ARGS are added to every run's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSWEEP = os.path.join(ROOT, "target", "release", "netsweep")
OUT = os.path.join(ROOT, "target", "bench", "calibration")


def run(name, args):
    path = os.path.join(OUT, name + ".json")
    subprocess.run([NETSWEEP, "run", *args, "-o", path, "-q"], check=True,
                   stdout=subprocess.DEVNULL, timeout=600)
    with open(path) as f:
        return path, json.load(f)


def compare(a, b, extra=()):
    o = subprocess.run([NETSWEEP, "compare", a, b, "--format", "json", *extra],
                       check=True, capture_output=True, timeout=120)
    return json.loads(o.stdout)["comparisons"][0]


def aa(args):
    flagged = total = 0
    changes = []
    print("| pair | metric | points | flagged | median change [95% interval] |")
    print("|---|---|---|---|---|")
    for i in range(args.pairs):
        a, _ = run(f"aa-{i}-a", args.run)
        b, _ = run(f"aa-{i}-b", args.run)
        c = compare(a, b)
        for m in c["metrics"]:
            rows = m["rows"]
            flagged += m["differing"]
            total += len(rows)
            changes += [abs(r["ratio"] - 1) for r in rows if r["ratio"] is not None]
            ci = m["median_ratio_ci95"]
            ci = f"[{(ci[0] - 1) * 100:+.1f}%, {(ci[1] - 1) * 100:+.1f}%]" if ci else "-"
            print(f"| {i + 1} | {m['metric']} | {len(rows)} | {m['differing']} | "
                  f"{(m['median_ratio'] - 1) * 100:+.1f}% {ci} |")
    changes.sort()
    p95 = changes[int(0.95 * (len(changes) - 1))] if changes else float("nan")
    share = flagged / total if total else float("nan")
    print(f"\nA/A: {flagged} of {total} paired points flagged ({share * 100:.1f}%; target ≤ 5%)")
    print(f"95th percentile of |B/A − 1| over all paired points: {p95 * 100:.1f}%")
    return 0 if total and share <= 0.05 else 1


AB_SIZES = "64k,128k,256k,512k,1M"


def ab(args):
    if os.geteuid() != 0:
        sys.exit("bench/calibration.py ab needs root (network namespaces)")
    run_args = ["-t", "tcp", "-p", "stream", "--sizes", AB_SIZES, *args.run]
    t = ['name = "calibration-ab"', "[topology]",
         '[[topology.hosts]]\nname = "client"', '[[topology.hosts]]\nname = "server"']
    for i, (name, rate) in enumerate((("fast", "50mbit"), ("slow", "47mbit"))):
        t.append(f'[[topology.links]]\nname = "{name}"\na = "client"\nb = "server"\n'
                 f'subnet = "198.18.{70 + i}.0/24"\nrate = "{rate}"')
    for i in range(args.pairs):
        for side, link in (("a", "fast"), ("b", "slow")):
            t.append(f'[[run]]\nname = "{side}-{i}"\nclient = "client"\nserver = "server"\n'
                     f'via = "{link}"\nargs = {json.dumps(run_args)}\ntimeout = 600')
    path = os.path.join(OUT, "ab.toml")
    with open(path, "w") as f:
        f.write("\n\n".join(t) + "\n")
    out = os.path.join(OUT, "ab")
    subprocess.run([NETSWEEP, "scenario", "run", path, "-o", out], check=True,
                   stdout=subprocess.DEVNULL, timeout=3600)
    slower = total = 0
    print("| pair | points | flagged B slower | median change [95% interval] |")
    print("|---|---|---|---|")
    for i in range(args.pairs):
        c = compare(os.path.join(out, f"a-{i}.json"), os.path.join(out, f"b-{i}.json"))
        m = next(m for m in c["metrics"] if m["metric"] == "throughput")
        worse = sum(1 for r in m["rows"] if r["verdict"] == "worse")
        slower += worse
        total += len(m["rows"])
        ci = m["median_ratio_ci95"]
        ci = f"[{(ci[0] - 1) * 100:+.1f}%, {(ci[1] - 1) * 100:+.1f}%]" if ci else "-"
        print(f"| {i + 1} | {len(m['rows'])} | {worse} | "
              f"{(m['median_ratio'] - 1) * 100:+.1f}% {ci} |")
    share = slower / total if total else float("nan")
    print(f"\nA/B (47 vs 50 Mbit/s, arithmetic −6%): {slower} of {total} paired points flagged B "
          f"slower ({share * 100:.1f}%; target ≥ 90%)")
    return 0 if total and share >= 0.9 else 1


def coverage(args):
    _, first = run("cov-first", args.run)
    later = [run(f"cov-later-{i}", args.run)[1] for i in range(args.later)]
    ok = {"throughput": [0, 0], "latency": [0, 0]}

    def figures(p):
        out = {"throughput": (p["throughput_mbps"]["mean"], p["throughput_mbps"].get("ci95"))}
        if p.get("latency"):
            h = p["latency"]["half_rtt_ns"]
            out["latency"] = (h["mean"], h.get("ci95"))
        return out

    for p in first["points"]:
        for metric, (mean, ci) in figures(p).items():
            seen = [figures(q)[metric][0] for r in later for q in r["points"]
                    if q["size"] == p["size"] and metric in figures(q)]
            if len(seen) < len(later) or ci is None:
                continue
            ok[metric][1] += 1
            if mean - ci <= statistics.median(seen) <= mean + ci:
                ok[metric][0] += 1
    status = 0
    for metric, (inside, n) in ok.items():
        if n:
            print(f"coverage, {metric}: the later median inside the first run's interval at "
                  f"{inside} of {n} points ({inside / n * 100:.1f}%; target ≥ 90%)")
            status |= int(inside / n < 0.9)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["aa", "coverage", "ab"])
    ap.add_argument("--pairs", type=int, default=None, help="aa: 10, ab: 5")
    ap.add_argument("--later", type=int, default=5)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = ap.parse_args(argv[:cut])
    args.run = argv[cut + 1:]
    if args.pairs is None:
        args.pairs = 5 if args.mode == "ab" else 10
    if not os.access(NETSWEEP, os.X_OK):
        sys.exit(f"{NETSWEEP} is missing: cargo build --release first")
    os.makedirs(OUT, exist_ok=True)
    sys.exit({"aa": aa, "coverage": coverage, "ab": ab}[args.mode](args))


if __name__ == "__main__":
    main()
