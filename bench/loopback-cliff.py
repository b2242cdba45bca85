#!/usr/bin/env python3
"""bench/loopback-cliff.py — why one TCP stream on loopback drops between 512 KiB and 1 MiB
messages (issue 31, seed 004: "explain the drop netsweep's own TCP shows … find its cause
with the kernel's counters").

For each message size, netsweep and iperf3 stream over loopback (client pinned to CPU 0,
server to CPU 1, as bench/peers and bench/stream-counters.py do), tools alternating within
each round. One second into each stream a window opens over both processes: `perf stat`
counts their system calls, context switches and CPU time, the loopback interface's byte
counter gives the bytes moved (an independent count), and `nstat` gives every TCP event the
kernel counted over the same window (retransmissions, receive-queue collapses and prunes,
zero windows, backlog drops …) and every CPU's input backlog its drops. Beside them, `bench/c/copy.c` copies a message of the same
size the way a sender's send call does — the same source buffer every call, into memory
that moves on — pinned to CPU 0: the rate of that copy alone, with no socket at all; and
netsweep's default run (in-process server, unpinned) measures the same size, as the issue
saw the drop.

Writes docs/performance-loopback-cliff.md (--out elsewhere) and every round's figures beside it
(.json): the rates per size, the TCP events per GB, and the reading, computed from them. Needs root (perf tracepoints), perf,
nstat (iproute2), gcc, taskset, iperf3, and a release netsweep (cargo build --release).

  sudo bench/loopback-cliff.py [--reps 5] [--secs 4] [--sizes 256k,512k,768k,1m,2m]
  bench/loopback-cliff.py --render     # the page again from its committed data
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSWEEP = os.path.join(ROOT, "target", "release", "netsweep")
COPY = os.path.join(ROOT, "target", "bench", "copy")
HOST = "127.0.0.1"
# iperf3 (3.12) refuses blocks over 1 MiB.
IPERF3_MAX = 1 << 20
TMP = tempfile.mkdtemp(prefix="netsweep-loopback-cliff-")

_spec = importlib.util.spec_from_file_location(
    "stream_counters", os.path.join(ROOT, "bench", "stream-counters.py"))
sc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sc)

# The TCP events that would mark a protocol-level cause: loss and recovery, a receive queue
# the kernel had to collapse or prune, a window that closed, a backlog that overflowed.
EVENTS = ["TcpRetransSegs", "TcpExtTCPRcvCollapsed", "TcpExtPruneCalled",
          "TcpExtRcvPruned", "TcpExtTCPRcvQDrop", "TcpExtTCPBacklogDrop",
          "TcpExtTCPToZeroWindowAdv", "TcpExtTCPFromZeroWindowAdv",
          "TcpExtTCPWantZeroWindowAdv", "TcpExtTCPMemoryPressures", "TcpExtTCPOFOQueue",
          "TcpExtTCPBacklogCoalesce", "TcpExtDelayedACKs", "TcpExtTCPSackRecovery",
          "softnet dropped"]


def softnet_drops(path):
    """Packets every CPU's input backlog dropped (the second column of softnet_stat, hex):
    loopback's receive path queues there."""
    with open(path) as f:
        return sum(int(line.split()[1], 16) for line in f if line.strip())


def default_rate(size, secs):
    """netsweep's default run at one size (in-process server, the scheduler places both
    ends): its own receiver figure, Gbit/s."""
    out = os.path.join(TMP, "default.json")
    subprocess.run([NETSWEEP, "run", "-t", "tcp", "-p", "stream", "--sizes", str(size),
                    "--max-point-time", f"{secs}s", "--no-save", "-q", "-o", out],
                   capture_output=True, timeout=secs + 30, check=True)
    with open(out) as f:
        return json.load(f)["points"][0]["receiver_mbps"]["mean"] / 1000


def log(msg):
    print(f"[loopback-cliff {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_size(s):
    s = s.strip().lower()
    mult = {"k": 1024, "m": 1024 * 1024}.get(s[-1:], 1)
    return int(s.rstrip("km")) * mult


def label(n):
    return f"{n // (1024 * 1024)} MiB" if n % (1024 * 1024) == 0 else f"{n // 1024} KiB"


def tools(size, secs):
    def netsweep(extra):
        return lambda p: [NETSWEEP, "run", f"{HOST}:{p}", "-t", "tcp", "-p", "stream",
                          "--sizes", str(size), "--trial-time", "500ms", "--min-trials", "20",
                          "--max-trials", "20", "--max-point-time", f"{secs + 2}s",
                          "--no-warmup", "--no-save", "-q", "-o",
                          os.path.join(TMP, "ns.json")] + extra

    def serve(extra):
        return lambda p: [NETSWEEP, "serve", "--bind", HOST, "--port", str(p), "-q"] + extra

    return [
        sc.Tool("netsweep", serve([]), netsweep([])),
        # The same stream under cubic (no pacing; the host's default here is bbr), which a
        # server lets a client choose only when its operator allows it.
        sc.Tool("netsweep cubic", serve(["--allow", "cc"]), netsweep(["--cc", "cubic"])),
    ] + ([] if size > IPERF3_MAX else [
            sc.Tool("iperf3",
                    lambda p: ["iperf3", "-s", "-1", "-p", str(p)],
                    lambda p: ["iperf3", "-c", HOST, "-p", str(p), "-t", str(secs), "-l",
                               str(size)]),
    ])


def window(pids, secs, out, nstat_out):
    """perf stat on pids while a shell brackets the window with the loopback byte counter
    and nstat (history reset at the start, every counter's change printed at the end)."""
    lo = "/sys/class/net/lo/statistics/tx_bytes"
    env = dict(os.environ, NSTAT_HISTORY=os.path.join(TMP, "nstat.history"))
    return subprocess.Popen(
        ["perf", "stat", "-x", ",", "-o", out, "-e", ",".join(sc.EVENTS),
         "-p", ",".join(str(p) for p in pids), "--", "sh", "-c",
         f"cat {lo}; nstat -n; cat /proc/net/softnet_stat > {nstat_out}.softnet0; "
         f"sleep {secs}; cat {lo}; nstat -z --json > {nstat_out}; "
         f"cat /proc/net/softnet_stat > {nstat_out}.softnet1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def one(tool, secs, win):
    port = sc.free_port()
    srv = subprocess.Popen(sc.pin(1) + tool.server(port), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    cli = subprocess.Popen(sc.pin(0) + tool.client(port), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    nstat_out = os.path.join(TMP, "nstat.json")
    outs = {e: os.path.join(TMP, f"{tool.name}-{e}.perf") for e in ("client", "server")}
    try:
        time.sleep(1.0)
        if cli.poll() is not None:
            raise RuntimeError(f"{tool.name} client ended early: {cli.stderr.read()[-500:]}")
        pids = {"client": sc.family(cli.pid), "server": sc.family(srv.pid)}
        # One window carries nstat (the client's); both count over the same seconds.
        perfs = {
            "client": window(pids["client"], win, outs["client"], nstat_out),
            "server": sc.perf_attach(pids["server"], win, outs["server"]),
        }
        moved = sc.window_bytes(perfs, win)
        cli.wait(timeout=secs + 30)
    finally:
        sc.stop(cli, srv)
    with open(nstat_out) as f:
        kernel = json.load(f)["kernel"]
    kernel["softnet dropped"] = softnet_drops(nstat_out + ".softnet1") - softnet_drops(
        nstat_out + ".softnet0")
    gb = moved["server"] / 1e9
    out = {"gbps": moved["server"] * 8 / win / 1e9,
           "events_per_gb": {e: kernel.get(e, 0) / gb for e in EVENTS}}
    for end in ("client", "server"):
        v = sc.parse_perf(outs[end])
        mb = moved[end] / 1e6
        data = sum(v.get(f"syscalls:sys_enter_{s}", 0) for s in sc.DATA)
        out[end] = {"cpu": v.get("task-clock", 0) / 1000 / win,
                    "cs_per_mb": v.get("context-switches", 0) / mb,
                    "kib_per_data_call": moved[end] / 1024 / data if data else float("nan")}
    if tool.name.startswith("netsweep"):
        try:
            with open(os.path.join(TMP, "ns.json")) as f:
                out["own_gbps"] = json.load(f)["points"][0]["receiver_mbps"]["mean"] / 1000
        except (OSError, ValueError, KeyError, IndexError):
            pass
    return out


def copy_rate(size, secs):
    p = subprocess.run(sc.pin(0) + [COPY, str(size), str(secs)], capture_output=True,
                       text=True, timeout=secs + 30, check=True)
    fields = dict(kv.split("=") for kv in p.stdout.split())
    return float(fields["gbytes_per_s"])


def cache_sizes():
    """(level, size text) of CPU 0's data and unified caches, from sysfs."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    out = []
    for idx in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        d = os.path.join(base, idx)
        try:
            kind = open(os.path.join(d, "type")).read().strip()
            if kind == "Instruction":
                continue
            out.append((open(os.path.join(d, "level")).read().strip(),
                        open(os.path.join(d, "size")).read().strip(),
                        open(os.path.join(d, "shared_cpu_list")).read().strip()))
        except OSError:
            continue
    return out


def reading(sizes, series, events, cc):
    """The page's reading: each series' steps between neighbouring sizes, the largest step
    down of netsweep's stream, and which TCP events moved across it."""
    med = sc.med

    def step(name, x, y):
        a, b = med(series[name][x]), med(series[name][y])
        return b / a if a == a and b == b and a > 0 else None

    steps = [(x, y) for x, y in zip(sizes, sizes[1:])]
    worst = min(steps, key=lambda xy: step("netsweep", *xy) or 9)
    x, y = worst
    lines = [
        f"**netsweep's largest step down (pinned, {cc}) is from {label(x)} to {label(y)}: "
        f"×{step('netsweep', x, y):.2f}.** Over the same step: "
        + ", ".join(f"{n} ×{step(n, x, y):.2f}" for n in series
                    if n != "netsweep" and step(n, x, y) is not None) + ".",
        "",
        "Each step, every series (×: the median at the larger size over the median at the "
        "smaller):",
        "",
        "| series | " + " | ".join(f"{label(a)}→{label(b)}" for a, b in steps) + " |",
        "|---|" + "---|" * len(steps),
    ]
    for n in series:
        cells = [step(n, a, b) for a, b in steps]
        lines.append(f"| {n} | " + " | ".join("—" if c is None else f"×{c:.2f}"
                                              for c in cells) + " |")
    # Where each round's own largest step down fell (rounds where every size has a figure).
    per = series["netsweep"]
    rounds = min(len(per[z]) for z in sizes)
    places = {}
    for r in range(rounds):
        xy = min(steps, key=lambda st: per[st[1]][r] / per[st[0]][r])
        places[xy] = places.get(xy, 0) + 1
    if rounds:
        lines += ["", f"Round by round, netsweep's largest step down fell at "
                  + ", ".join(f"{label(a)}→{label(b)} in {n}" for (a, b), n in
                              sorted(places.items(), key=lambda kv: -kv[1]))
                  + f" of {rounds} rounds."]
    moved = []
    for e in EVENTS:
        before = med([v[e] for v in events["netsweep"][x]])
        after = med([v[e] for v in events["netsweep"][y]])
        if max(before, after) >= 1 and (min(before, after) == 0 or
                                        max(before, after) / min(before, after) > 2):
            moved.append(f"{e} {before:.1f} → {after:.1f} per GB")
    lines.append("")
    if moved:
        lines.append(f"TCP events per GB that changed more than twofold across "
                     f"{label(x)}→{label(y)}: " + "; ".join(moved) + ".")
    else:
        lines.append(f"No TCP event the kernel counts changed more than twofold per GB across "
                     f"{label(x)}→{label(y)} (tables below).")
    return lines


def measure(a, sizes):
    """Every round of every series; the data the page is rendered from."""
    os.makedirs(os.path.dirname(COPY), exist_ok=True)
    subprocess.run(["gcc", "-O2", "-o", COPY, os.path.join(ROOT, "bench", "c", "copy.c")],
                   check=True)
    win = max(1.0, a.secs - 2.0)
    names = [t.name for t in tools(sizes[0], a.secs)]
    keys = [str(s) for s in sizes]
    d = {
        "command": f"bench/loopback-cliff.py --reps {a.reps} --secs {a.secs} --sizes {a.sizes}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpus": os.cpu_count(), "caches": cache_sizes(), "reps": a.reps, "window_s": win,
        "cc": subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                             capture_output=True, text=True).stdout.strip(),
        "sizes": sizes,
        "rates": {n: {k: [] for k in keys} for n in names},
        "own": {k: [] for k in keys}, "copies": {k: [] for k in keys},
        "defaults": {k: [] for k in keys},
        "events": {n: {k: [] for k in keys} for n in names if n.startswith("netsweep")},
        "cpu": {n: {k: [] for k in keys} for n in names},
    }
    t0 = time.monotonic()
    for r in range(a.reps):
        for s in sizes:
            k = str(s)
            ts = tools(s, a.secs)
            for i in range(len(ts)):
                t = ts[(i + r) % len(ts)]
                try:
                    x = one(t, a.secs, win)
                except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as e:
                    log(f"{t.name} {label(s)} rep {r + 1} failed: {e}")
                    continue
                d["rates"][t.name][k].append(x["gbps"])
                d["cpu"][t.name][k].append([x["client"]["cpu"], x["server"]["cpu"],
                                            x["client"]["cs_per_mb"],
                                            x["server"]["cs_per_mb"]])
                if t.name in d["events"]:
                    d["events"][t.name][k].append(x["events_per_gb"])
                if t.name == "netsweep":
                    d["own"][k].append(x.get("own_gbps"))
                log(f"{t.name} {label(s)} rep {r + 1}: {x['gbps']:.1f} Gbit/s on lo")
            d["copies"][k].append(copy_rate(s, 1))
            try:
                d["defaults"][k].append(default_rate(s, a.secs))
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError,
                    ValueError, KeyError, IndexError) as e:
                log(f"default run {label(s)} rep {r + 1} failed: {e}")
    d["wall_s"] = time.monotonic() - t0
    return d


def clean_counts(d):
    """The TCP events a variant counted at no size at all (e.g. cubic's reordering)."""
    out = {}
    for n, by_size in d["events"].items():
        out[n] = [e for e in EVENTS
                  if all(sc.med([v[e] for v in vs]) == 0 for vs in by_size.values() if vs)]
    return out


def render(d):
    """The page, from the data alone."""
    med = sc.med
    sizes = d["sizes"]

    def by_size(m):
        return {s: m[str(s)] for s in sizes}

    caches = ", ".join(f"L{lv} {sz} (CPUs {cpus})" for lv, sz, cpus in d["caches"])
    lines = [
        "# The loopback stream's step between 512 KiB and 1 MiB messages",
        "",
        "<!-- Written by bench/loopback-cliff.py from docs/performance-loopback-cliff.json; "
        "rerun it rather than edit this file. -->",
        "",
        "Issue 31 asked for the cause of the step down netsweep's single TCP stream shows on "
        "loopback between 512 KiB and 1 MiB messages (the default run reports it as a "
        "cliff), from the kernel's counters. This page is the measurement: netsweep's "
        "stream pinned (client CPU 0, server CPU 1) under the host's default congestion "
        "control and under cubic, iperf3 at the same sizes, netsweep's default run, the "
        "TCP events `nstat` counted over each stream's window, every CPU's input-backlog "
        "drops, and the copy a sender's call makes with no socket at all (a cache step "
        "would show there).",
        "",
        f"`{d['command']}`, {d['date']}, {d['wall_s']:.0f} s; {d['cpus']} CPUs; CPU 0's "
        f"caches: {caches}. Medians of {d['reps']} rounds (tools alternating), min–max "
        f"beside; Gbit/s from the loopback interface's byte counter over a "
        f"{d['window_s']:.0f} s window one second into each stream; TCP events from `nstat` "
        "over the same window; the copy is `bench/c/copy.c` on CPU 0 (one source buffer of "
        "the size, copied into a 64 MiB ring).",
        "",
    ]
    rates = {n: by_size(m) for n, m in d["rates"].items()}
    events = {n: by_size(m) for n, m in d["events"].items()}
    series = dict(rates)
    series["netsweep default run"] = by_size(d["defaults"])
    series["copy alone"] = by_size(d["copies"])
    if all(rates["netsweep"][s] and events["netsweep"][s] for s in sizes):
        lines += reading(sizes, series, events, d["cc"]) + [""]
        quiet = clean_counts(d)
        for n, evs in events.items():
            if n == "netsweep":
                continue
            noisy = [e for e in ("TcpExtTCPOFOQueue", "TcpRetransSegs", "TcpExtTCPSackRecovery")
                     if e in quiet.get(n, []) and e not in quiet.get("netsweep", [])]
            if noisy:
                worst = {e: max(med([v[e] for v in events["netsweep"][s]]) for s in sizes)
                         for e in noisy}
                drops = ["softnet dropped", "TcpExtPruneCalled", "TcpExtTCPRcvCollapsed",
                         "TcpExtTCPBacklogDrop", "TcpExtTCPRcvQDrop"]
                dropped = [e for e in drops if e not in quiet.get("netsweep", [])]
                path = ("on a path that dropped nothing (input-backlog, prune, collapse, "
                        "backlog and receive-queue drops are zero at every size)"
                        if not dropped else
                        "on a path that also dropped (" + ", ".join(dropped) + " counted)")
                lines += [f"Under {n.split()[-1]}, {', '.join(noisy)} stayed at zero at every "
                          f"size; under {d['cc']} they reached "
                          + ", ".join(f"{worst[e]:.1f}" for e in noisy)
                          + " per GB (the largest median over the sizes): segments arrive "
                          "out of order and TCP recovers as from a loss, " + path + ".", ""]
    lines += [
        "| message | netsweep Gbit/s | its own figure | netsweep cubic Gbit/s | iperf3 Gbit/s "
        "| netsweep's default run (unpinned, in-process) | copy alone GB/s | CPUs busy, "
        "netsweep client / server | context switches per MB, client / server |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def span(xs):
        xs = [x for x in xs if x is not None]
        return f"{med(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})" if xs else "—"

    for s in sizes:
        c = d["cpu"]["netsweep"][str(s)]
        lines.append(
            f"| {label(s)} | {span(rates['netsweep'][s])} "
            f"| {med(d['own'][str(s)]):.1f} | {span(rates['netsweep cubic'][s])} "
            f"| {span(rates['iperf3'][s])} | {span(series['netsweep default run'][s])} "
            f"| {span(series['copy alone'][s])} "
            f"| {med([x[0] for x in c]):.2f} / {med([x[1] for x in c]):.2f} "
            f"| {med([x[2] for x in c]):.2f} / {med([x[3] for x in c]):.2f} |")
    for n in events:
        lines += ["", f"TCP events per GB moved, {n}'s streams (medians):", "",
                  "| event | " + " | ".join(label(s) for s in sizes) + " |",
                  "|---|" + "---|" * len(sizes)]
        for e in EVENTS:
            lines.append(f"| {e} | " + " | ".join(
                f"{med([x[e] for x in events[n][s]]):.1f}" for s in sizes) + " |")
    lines += [
        "", "Not measured here: why the default congestion control's segments reach the "
        "receiver out of order on a path that drops nothing. `nstat` counts the reordering "
        "and the recoveries, not where they came from; telling a paced send from a timer on "
        "the other CPU (one possible path) from any other would take tracing, which this "
        "page does not do."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--secs", type=int, default=4, help="each stream, seconds")
    ap.add_argument("--sizes", default="256k,512k,768k,1m,2m",
                    help="message sizes (iperf3 stops at 1m: it has no figure above)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs",
                                                  "performance-loopback-cliff.md"),
                    help="the page; its data goes beside it (.json)")
    ap.add_argument("--render", action="store_true",
                    help="rewrite the page from its committed data; measure nothing")
    a = ap.parse_args()
    data_path = os.path.splitext(a.out)[0] + ".json"
    if a.render:
        with open(data_path) as f:
            d = json.load(f)
    else:
        if os.geteuid() != 0:
            sys.exit("loopback-cliff: needs root (perf's syscall tracepoints)")
        if not os.path.exists(NETSWEEP):
            sys.exit("loopback-cliff: build netsweep first: cargo build --release")
        sizes = [parse_size(s) for s in a.sizes.split(",")]
        if len(sizes) < 2 or sizes != sorted(sizes) or a.reps < 1 or not 2 <= a.secs <= 30:
            sys.exit("loopback-cliff: --sizes needs two or more increasing sizes, --reps ≥ 1, "
                     "--secs 2..30")
        d = measure(a, sizes)
        with open(data_path, "w") as f:
            json.dump(d, f, indent=1)
            f.write("\n")
    text = render(d)
    print(text)
    with open(a.out, "w") as f:
        f.write(text)
    log(f"wrote {a.out}")


if __name__ == "__main__":
    main()
