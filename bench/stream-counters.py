#!/usr/bin/env python3
"""bench/stream-counters.py — where a single TCP stream's time goes, per end, per tool
(issue 27 item 4).

bench/peers ranks the tools by Gbit/s; this says whether they do the same work. Each tool
streams 128 KiB messages over loopback, client pinned to CPU 0 and server to CPU 1, as
bench/peers does; one second into the stream, `perf stat` attaches to both processes for
the same window and counts their system calls by kind, context switches, migrations and
CPU time, while the loopback interface's own byte counter gives the bytes moved over that
window (an independent count, headers included: the same MSS for every tool). `ss -tmi`
on the data connection gives the socket buffers the kernel settled on (autotuning) and the
congestion control. Tools run round-robin, REPS times each, every run bounded in time.

Prints a Markdown table per tool and end (medians over the repetitions) and writes the page
docs/performance-stream-counters.md (--out elsewhere). Needs root (perf tracepoints), perf, taskset, qperf, nuttcp and iperf3
(bench/peers installs them), and a release netsweep (cargo build --release).

  sudo bench/stream-counters.py [--reps 5] [--secs 5] [--out FILE]
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSWEEP = os.path.join(ROOT, "target", "release", "netsweep")
HOST = "127.0.0.1"
TMP = tempfile.mkdtemp(prefix="netsweep-stream-counters-")
SIZE = 131072

# System calls that move data, and those that wait or wake.
DATA = ["write", "writev", "sendto", "sendmsg", "read", "readv", "recvfrom", "recvmsg"]
WAIT = ["poll", "ppoll", "epoll_wait", "epoll_pwait", "select", "pselect6", "futex",
        "nanosleep", "clock_nanosleep", "sched_yield"]
EVENTS = (["task-clock", "context-switches", "cpu-migrations", "raw_syscalls:sys_enter"]
          + [f"syscalls:sys_enter_{s}" for s in DATA + WAIT])


def log(msg):
    print(f"[stream-counters {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def pin(cpu):
    return ["taskset", "-c", str(cpu)]


def free_port():
    import socket
    s = socket.socket()
    s.bind((HOST, 0))
    p = s.getsockname()[1]
    s.close()
    return p


def family(pid):
    """pid and its descendants (qperf's server forks a child per test)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        kids = subprocess.run(["pgrep", "-P", str(p)], capture_output=True, text=True).stdout
        todo.extend(int(k) for k in kids.split())
    return out


def perf_attach(pids, secs, out):
    """perf stat attached to pids (all their threads) while a shell reads the loopback byte
    counter, sleeps secs and reads it again: the two readings bracket the counting window."""
    lo = "/sys/class/net/lo/statistics/tx_bytes"
    return subprocess.Popen(
        ["perf", "stat", "-x", ",", "-o", out, "-e", ",".join(EVENTS),
         "-p", ",".join(str(p) for p in pids),
         "--", "sh", "-c", f"cat {lo}; sleep {secs}; cat {lo}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def window_bytes(perfs, window):
    """{end: loopback bytes over its window}, from each window's two counter readings."""
    moved = {}
    for end, p in perfs.items():
        so, _ = p.communicate(timeout=window + 10)
        b = [int(x) for x in so.split()]
        moved[end] = b[1] - b[0]
    return moved


def stop(*procs):
    """Ends each process still running: SIGINT, then SIGKILL after 5 s."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def parse_perf(path):
    """{event: value} from perf stat -x, output (task-clock in ms)."""
    vals = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) < 3 or not parts[0] or line.startswith("#"):
                continue
            try:
                v = float(parts[0])
            except ValueError:
                continue
            vals[parts[2]] = v
    return vals


class Tool:
    """One tool: how to start its server and its client on a port."""

    def __init__(self, name, server, client):
        self.name, self.server, self.client = name, server, client


def tools(secs):
    return [
        Tool("netsweep",
             lambda p: [NETSWEEP, "serve", "--bind", HOST, "--port", str(p), "-q"],
             lambda p: [NETSWEEP, "run", f"{HOST}:{p}", "-t", "tcp", "-p", "stream",
                        "--sizes", "128k", "--trial-time", "500ms", "--min-trials", "20",
                        "--max-trials", "20", "--max-point-time", f"{secs + 2}s",
                        "--no-warmup", "--no-save", "-q", "-o", os.path.join(TMP, "ns.json")]),
        Tool("qperf",
             lambda p: ["qperf", "-lp", str(p)],
             lambda p: ["qperf", HOST, "-lp", str(p), "-t", str(secs), "-m", str(SIZE),
                        "tcp_bw"]),
        Tool("iperf3",
             lambda p: ["iperf3", "-s", "-1", "-p", str(p)],
             lambda p: ["iperf3", "-c", HOST, "-p", str(p), "-t", str(secs), "-l", "128K"]),
        Tool("nuttcp",
             lambda p: ["nuttcp", "-1", "--nofork", "-P", str(p), "-p", str(p + 1)],
             lambda p: ["nuttcp", f"-T{secs}", "-l128k", "-P", str(p), "-p", str(p + 1), HOST]),
    ]


def ss_by_pid(pids):
    """Buffers and cc of the busiest established TCP connection of the processes pids."""
    p = subprocess.run(["ss", "-tmipH", "state", "established"], capture_output=True,
                       text=True, timeout=5)
    best = None
    blocks = re.split(r"\n(?=\S)", p.stdout)
    for b in blocks:
        if not any(f"pid={pid}," in b for pid in pids):
            continue
        acked = re.search(r"bytes_(?:acked|received):(\d+)", b)
        n = int(acked.group(1)) if acked else 0
        if best is None or n > best[0]:
            best = (n, b)
    if not best:
        return {"rb": None, "tb": None, "cc": "?"}
    b = best[1]
    rb = re.search(r"\brb(\d+)", b)
    tb = re.search(r"\btb(\d+)", b)
    cc = re.search(r"\s(bbr|cubic|reno)\s", b)
    return {"rb": int(rb.group(1)) if rb else None, "tb": int(tb.group(1)) if tb else None,
            "cc": cc.group(1) if cc else "?"}


def one(tool, secs, window):
    port = free_port()
    srv = subprocess.Popen(pin(1) + tool.server(port), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    cli = subprocess.Popen(pin(0) + tool.client(port), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        if cli.poll() is not None:
            raise RuntimeError(f"{tool.name} client ended early: {cli.stderr.read()[-500:]}")
        outs = {e: os.path.join(TMP, f"{tool.name}-{e}.perf") for e in ("client", "server")}
        pids = {"client": family(cli.pid), "server": family(srv.pid)}
        perfs = {end: perf_attach(pids[end], window, outs[end]) for end in pids}
        time.sleep(window / 2)
        sock = {end: ss_by_pid(pids[end]) for end in pids}
        moved = window_bytes(perfs, window)
        cli.wait(timeout=secs + 30)
    finally:
        stop(cli, srv)
    out = {}
    for end in ("client", "server"):
        v = parse_perf(outs[end])
        mb = moved[end] / 1e6
        data = sum(v.get(f"syscalls:sys_enter_{s}", 0) for s in DATA)
        wait = sum(v.get(f"syscalls:sys_enter_{s}", 0) for s in WAIT)
        out[end] = {
            "gbps": moved[end] * 8 / window / 1e9,
            "cpu": v.get("task-clock", 0) / 1000 / window,
            "syscalls_per_mb": v.get("raw_syscalls:sys_enter", 0) / mb,
            "data_calls_per_mb": data / mb,
            "kib_per_data_call": moved[end] / 1024 / data if data else float("nan"),
            "wait_calls_per_mb": wait / mb,
            "cs_per_mb": v.get("context-switches", 0) / mb,
            "migrations": v.get("cpu-migrations", 0),
            "calls": {s: int(v.get(f"syscalls:sys_enter_{s}", 0)) for s in DATA + WAIT
                      if v.get(f"syscalls:sys_enter_{s}", 0)},
            "rb": sock[end]["rb"], "tb": sock[end]["tb"], "cc": sock[end]["cc"],
        }
    if tool.name == "netsweep":
        # Its own figure, over its trials only (the window above also spans the control
        # exchanges between its 500 ms trials).
        try:
            with open(os.path.join(TMP, "ns.json")) as f:
                p = json.load(f)["points"][0]
            out["own_gbps"] = p["receiver_mbps"]["mean"] / 1000
        except (OSError, ValueError, KeyError, IndexError):
            pass
    return out


def med(xs):
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else float("nan")


def verdict(runs):
    """The page's reading, computed from the runs: netsweep against the best peer, and
    whether the senders made the same calls."""
    gb = {t: med([r["server"]["gbps"] for r in rs]) for t, rs in runs.items() if rs}
    if "netsweep" not in gb or len(gb) < 2:
        return ["Not enough runs completed to compare (see the table)."]
    peers = {t: g for t, g in gb.items() if t != "netsweep"}
    best = max(peers, key=peers.get)
    per_call = {t: med([r["client"]["kib_per_data_call"] for r in rs])
                for t, rs in runs.items() if rs}
    busy = {t: med([r["client"]["cpu"] for r in rs]) for t, rs in runs.items() if rs}
    rbusy = {t: med([r["server"]["cpu"] for r in rs]) for t, rs in runs.items() if rs}
    recv = {t: med([r["server"]["kib_per_data_call"] for r in rs])
            for t, rs in runs.items() if rs}
    own = med([r.get("own_gbps") for r in runs["netsweep"]])
    span = {t: (min(r["server"]["gbps"] for r in rs), max(r["server"]["gbps"] for r in rs))
            for t, rs in runs.items() if rs}
    overlap = span["netsweep"][0] <= span[best][1] and span[best][0] <= span["netsweep"][1]
    data_mb = {t: med([r["server"]["data_calls_per_mb"] for r in rs])
               for t, rs in runs.items() if rs}
    least = min(data_mb, key=data_mb.get)
    return [
        f"**netsweep {gb['netsweep']:.1f} Gbit/s against the best peer, {best}, "
        f"{peers[best]:.1f}: {gb['netsweep'] / peers[best]:.2f}×** (medians of this run over "
        "the same kind of window; netsweep's own figure over its point's trials, a longer "
        f"window, {own:.1f}). Every sender makes one system call per message ("
        + ", ".join(f"{t} {per_call[t]:.1f} KiB" for t in per_call)
        + " per call). CPUs busy, sender / receiver: "
        + ", ".join(f"{t} {busy[t]:.2f} / {rbusy[t]:.2f}" for t in busy)
        + " (the sending CPU also runs the loopback's receive softirq). The receivers "
        "differ in read size ("
        + ", ".join(f"{t} {recv[t]:.0f} KiB" for t in recv)
        + f" per read: what had arrived when each woke); {least}'s receiver makes the fewest "
        "calls per byte. "
        + ("netsweep's range of rates overlaps the best peer's (min–max columns): the "
           "difference between their medians is within the run-to-run spread that bbr gives "
           "every tool here."
           if overlap else
           "netsweep's range of rates does not overlap the best peer's (min–max columns): "
           "the difference is more than run-to-run spread."),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--secs", type=int, default=5, help="each tool's stream, seconds")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance-stream-counters.md"),
                    help="the page to write (default docs/performance-stream-counters.md)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("stream-counters: needs root (perf's syscall tracepoints)")
    if not os.path.exists(NETSWEEP):
        sys.exit("stream-counters: build netsweep first: cargo build --release")
    window = max(1.0, a.secs - 2.0)
    ts = tools(a.secs)
    runs = {t.name: [] for t in ts}
    t0 = time.monotonic()
    for r in range(a.reps):
        for i in range(len(ts)):
            t = ts[(i + r) % len(ts)]
            try:
                runs[t.name].append(one(t, a.secs, window))
                x = runs[t.name][-1]["server"]
                log(f"{t.name} rep {r + 1}: {x['gbps']:.1f} Gbit/s on lo")
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                log(f"{t.name} rep {r + 1} failed: {e}")
    wall = time.monotonic() - t0
    cc = subprocess.run(["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                        capture_output=True, text=True).stdout.strip()
    lines = [
        f"`bench/stream-counters.py --reps {a.reps} --secs {a.secs}`, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {wall:.0f} s; default "
        f"congestion control `{cc}`; {os.cpu_count()} CPUs. Medians of {a.reps} runs; "
        f"a {window:.0f} s `perf stat` window per run one second into each stream; Gbit/s "
        "from the loopback interface's own byte counter over the window (headers included).",
        "",
        "| tool | end | Gbit/s (min–max) | CPU (busy CPUs) | syscalls/MB | data calls/MB | KiB per data call "
        "| wait calls/MB | context switches/MB | socket buffer (ss: rb/tb KiB) | cc |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    detail = []
    for t in ts:
        rs = runs[t.name]
        if not rs:
            lines.append(f"| {t.name} | — | no run completed | | | | | | | | |")
            continue
        for end in ("client", "server"):
            e = [r[end] for r in rs]
            rb, tb = med([x["rb"] for x in e]), med([x["tb"] for x in e])
            lines.append(
                f"| {t.name} | {end} | {med([x['gbps'] for x in e]):.1f} "
                f"({min(x['gbps'] for x in e):.1f}–{max(x['gbps'] for x in e):.1f}) "
                f"| {med([x['cpu'] for x in e]):.2f} "
                f"| {med([x['syscalls_per_mb'] for x in e]):.1f} "
                f"| {med([x['data_calls_per_mb'] for x in e]):.2f} "
                f"| {med([x['kib_per_data_call'] for x in e]):.1f} "
                f"| {med([x['wait_calls_per_mb'] for x in e]):.2f} "
                f"| {med([x['cs_per_mb'] for x in e]):.2f} "
                f"| {rb / 1024:.0f} / {tb / 1024:.0f} | {e[0]['cc']} |")
            detail.append(f"- {t.name} {end}, last run's calls in the window: {e[-1]['calls']}")
    text = "\n".join(lines + [""] + detail) + "\n"
    print(text)
    page = [
        "# A single TCP stream by kernel counters: does every tool do the same work?",
        "",
        "<!-- Written by bench/stream-counters.py; rerun it rather than edit this file. -->",
        "",
        "Issue 27 item 4: [performance.md](performance.md) ranks the tools by Gbit/s on the "
        "single 128 KiB stream; this page says, from the kernel's own counts, whether they do "
        "the same work to get there — system calls by kind and bytes per call on each end, "
        "wake-ups (context switches), CPU time, and the socket buffers autotuning settled on. "
        "Rerun (as root, ~2 minutes; needs `cargo build --release` and bench/peers' tools):",
        "",
        "```sh",
        f"bench/stream-counters.py --reps {a.reps} --secs {a.secs}",
        "```",
        "",
    ] + verdict(runs) + ["", text]
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(page))


if __name__ == "__main__":
    main()
