#!/usr/bin/env python3
"""bench/peers.py — the measuring half of bench/peers (issue 6).

Runs netsweep and the Debian peer tools (iperf3, nuttcp, qperf, sockperf, NPtcp) and a C
ping-pong floor side by side on loopback, alternating tools round-robin (the first tool of
each round rotates), every run bounded by a timeout, and writes docs/performance.md: medians
with min–max, the ratios against the issue's targets, the machine, the command to rerun,
and for every missed target a profile and the notes from bench/notes.md.

Called by bench/peers, which installs the tools and builds the binaries; not part of CI.
Only 127.0.0.1 is used. Every server this starts is stopped by its own process id.
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = "127.0.0.1"
TMP = tempfile.mkdtemp(prefix="netsweep-bench-")
LOG = []  # (tool, command, error) of every failed run, reported in the doc

# Placements: (label, client cpu, server cpu).
SAME = ("same CPU (client 0, server 0)", 0, 0)
SPLIT = ("split (client 0, server 1)", 0, 1)


def log(msg):
    print(f"[peers {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd, timeout):
    """Runs cmd (a list) to completion within timeout; returns (rc, stdout, stderr)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, e.stdout or "", (e.stderr or "") + f"\n(timed out after {timeout} s)"


class Server:
    """A peer's server process, started pinned and stopped by its pid."""

    def __init__(self, cmd, settle=0.3, stop_signal=signal.SIGTERM):
        self.out = open(os.path.join(TMP, f"server-{os.path.basename(cmd[3])}.log"), "w+")
        self.p = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT, text=True)
        self.stop_signal = stop_signal
        time.sleep(settle)

    def stop(self, timeout=5):
        if self.p.poll() is None:
            self.p.send_signal(self.stop_signal)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.out.flush()
        self.out.seek(0)
        return self.out.read()

    def wait(self, timeout):
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return self.stop()


def pin(cpu):
    return ["taskset", "-c", str(cpu)]


LO_RX = "/sys/class/net/lo/statistics/rx_bytes"
LO_TICK = 0.05


class LoRate:
    """The loopback interface's own byte counter, read every 50 ms in a thread while a tool
    runs: the same window for every tool whatever it reports (its trials, its whole test).
    The tool's rate is the median over the 50 ms windows that carried traffic (at least a
    fifth of the busiest one): setup, teardown and the gaps between netsweep's trials fall in
    the windows left out or in a few low ones, for every tool alike. Headers included (the
    same MSS for every tool on one path)."""

    def __init__(self):
        import threading
        self.samples = []
        self.done = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.done.is_set():
            with open(LO_RX) as f:
                self.samples.append((time.monotonic(), int(f.read())))
            self.done.wait(LO_TICK)

    def gbps(self):
        self.done.set()
        self.t.join()
        rates = [(b1 - b0) * 8 / (t1 - t0) / 1e9
                 for (t0, b0), (t1, b1) in zip(self.samples, self.samples[1:]) if t1 > t0]
        if not rates:
            return None
        busy = [r for r in rates if r >= max(rates) / 5]
        return statistics.median(busy) if len(busy) >= 5 else None


def lo_counted(book, row, tool):
    """Runs tool() with the loopback counter read beside it, into book(a, row, lo_gbps)."""
    lo = LoRate()
    try:
        tool()
    finally:
        g = lo.gbps()
        if g is not None:
            book("a", row, "lo_gbps").add(g)


# Below the ephemeral range (32768–60999), so no outgoing connection holds one.
_port = [20000 + os.getpid() % 4000]


def port():
    _port[0] += 7
    if _port[0] > 32000:
        _port[0] = 20000
    return _port[0]


def num(pattern, text, conv=float):
    m = re.search(pattern, text, re.M)
    return conv(m.group(1)) if m else None


def fail(tool, cmd, why):
    LOG.append((tool, " ".join(map(str, cmd)), why.strip()[-400:]))
    log(f"  {tool}: FAILED ({why.strip().splitlines()[-1] if why.strip() else '?'})")
    return None


# ---------------------------------------------------------------- netsweep


class Netsweep:
    def __init__(self, binary):
        self.bin = binary

    def run(self, args, cpu=None, taskset=None, timeout=120):
        """Runs netsweep with args; returns (results dict, wall seconds) or None."""
        out = os.path.join(TMP, "ns.json")
        if os.path.exists(out):
            os.remove(out)
        cmd = (pin(taskset) if taskset is not None else []) + [self.bin, "run"] + args
        if cpu is not None:
            cmd += ["--cpu", f"{cpu[0]},{cpu[1]}"]
        cmd += ["-o", out, "--no-save", "-q"]
        t0 = time.monotonic()
        rc, so, se = sh(cmd, timeout)
        wall = time.monotonic() - t0
        if rc != 0:
            return fail("netsweep", cmd, se or so)
        try:
            with open(out) as f:
                return json.load(f), wall
        except (OSError, ValueError) as e:
            return fail("netsweep", cmd, f"unreadable results: {e}")


def ns_point(res):
    return res[0]["points"][0] if res and res[0].get("points") else None


# ---------------------------------------------------------------- statistics


class Series:
    """Values of one figure over runs."""

    def __init__(self):
        self.v = []

    def add(self, x):
        if x is not None and not (isinstance(x, float) and math.isnan(x)):
            self.v.append(float(x))

    def med(self):
        return statistics.median(self.v) if self.v else None

    def fmt(self, digits=2, scale=1.0):
        if not self.v:
            return "n/a"
        m, lo, hi = self.med() * scale, min(self.v) * scale, max(self.v) * scale
        return f"{m:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f}, n={len(self.v)})"


class Book:
    """All series, keyed by (section, row, column)."""

    def __init__(self):
        self.s = {}

    def __call__(self, *key):
        return self.s.setdefault(key, Series())

    def med(self, *key):
        return self.s[key].med() if key in self.s else None


def rotate(tools, k):
    k %= len(tools)
    return tools[k:] + tools[:k]


# ---------------------------------------------------------------- (a)+(e) TCP stream


def stream_tcp(ns, book, runs, secs):
    log("a/e: TCP stream, one flow, 128 KiB writes, client CPU 0, server CPU 1")
    sz = 131072

    def netsweep():
        r = ns.run(["-t", "tcp", "-p", "stream", "--sizes", "128k", "--trial-time", "200ms",
                    "--min-trials", "5", "--max-point-time", f"{secs}s"], cpu=(0, 1))
        p = ns_point(r)
        if p:
            book("a", "netsweep", "gbps").add(p["receiver_mbps"]["mean"] / 1000)
            book("a", "netsweep", "cpu_tx").add(100 * p["client"]["cpu_utilisation"])
            book("a", "netsweep", "cpu_rx").add(100 * p["server"]["cpu_utilisation"])
            book("e", "netsweep", "sd_tx").add(p["client"]["service_demand_us_per_kb"])
            book("e", "netsweep", "sd_rx").add(p["server"]["service_demand_us_per_kb"])

    def netsweep_shm():
        # The in-host copy ceiling (shared-memory ring, issue 6 item 4): a reference row.
        r = ns.run(["-t", "shm", "-p", "stream", "--sizes", "128k", "--trial-time", "200ms",
                    "--min-trials", "5", "--max-point-time", f"{secs}s"], cpu=(0, 1))
        p = ns_point(r)
        if p:
            book("a", "netsweep shm (copy ceiling)", "gbps").add(p["receiver_mbps"]["mean"] / 1000)
            book("a", "netsweep shm (copy ceiling)", "cpu_tx").add(
                100 * p["client"]["cpu_utilisation"])
            book("a", "netsweep shm (copy ceiling)", "cpu_rx").add(
                100 * p["server"]["cpu_utilisation"])

    def netsweep_uring():
        # The io_uring api on the same path (issue 6 item 3): reported beside, not in the target.
        r = ns.run(["-t", "tcp", "-p", "stream", "--api", "uring", "--sizes", "128k",
                    "--trial-time", "200ms", "--min-trials", "5", "--max-point-time", f"{secs}s"],
                   cpu=(0, 1))
        p = ns_point(r)
        if p:
            book("a", "netsweep uring", "gbps").add(p["receiver_mbps"]["mean"] / 1000)
            book("a", "netsweep uring", "cpu_tx").add(100 * p["client"]["cpu_utilisation"])
            book("a", "netsweep uring", "cpu_rx").add(100 * p["server"]["cpu_utilisation"])

    def iperf3():
        pt = port()
        srv = Server(pin(1) + ["iperf3", "-s", "-1", "-p", str(pt)])
        cmd = pin(0) + ["iperf3", "-c", HOST, "-p", str(pt), "-t", str(secs), "-l", "128K", "-J"]
        rc, so, se = sh(cmd, secs + 20)
        srv.wait(5)
        try:
            d = json.loads(so)
            e = d["end"]
            bps = e["sum_received"]["bits_per_second"]
            secs_rx = e["sum_received"]["seconds"]
            cpu = e["cpu_utilization_percent"]
        except (ValueError, KeyError, TypeError) as x:
            return fail("iperf3", cmd, f"{x}: {se or so}")
        kib = e["sum_received"]["bytes"] / 1024
        book("a", "iperf3", "gbps").add(bps / 1e9)
        book("a", "iperf3", "cpu_tx").add(cpu["host_total"])
        book("a", "iperf3", "cpu_rx").add(cpu["remote_total"])
        # netperf's service demand: CPU µs per KiB moved = utilisation × time / KiB.
        book("e", "iperf3", "sd_tx").add(cpu["host_total"] / 100 * secs_rx * 1e6 / kib)
        book("e", "iperf3", "sd_rx").add(cpu["remote_total"] / 100 * secs_rx * 1e6 / kib)

    def nuttcp():
        pc = port()
        srv = Server(pin(1) + ["nuttcp", "-1", "--nofork", "-P", str(pc), "-p", str(pc + 1)])
        cmd = pin(0) + ["nuttcp", f"-T{secs}", "-l128k", "-P", str(pc), "-p", str(pc + 1),
                        "-fparse", HOST]
        rc, so, se = sh(cmd, secs + 20)
        srv.wait(5)
        mbps = num(r"rate_Mbps=([\d.]+)", so)
        if mbps is None:
            return fail("nuttcp", cmd, se or so)
        book("a", "nuttcp", "gbps").add(mbps / 1000)
        book("a", "nuttcp", "cpu_tx").add(num(r"tx_cpu=([\d.]+)", so))
        book("a", "nuttcp", "cpu_rx").add(num(r"rx_cpu=([\d.]+)", so))

    def qperf():
        pt = port()
        srv = Server(pin(1) + ["qperf", "-lp", str(pt)])
        cmd = pin(0) + ["qperf", HOST, "-lp", str(pt), "-t", str(secs), "-m", str(sz), "-v",
                        "tcp_bw"]
        rc, so, se = sh(cmd, secs + 20)
        srv.stop()
        m = re.search(r"^\s*bw\s*=\s*([\d.]+)\s*([KMG])B/sec", so, re.M)
        if not m:
            return fail("qperf", cmd, se or so)
        gbps = float(m.group(1)) * {"K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)] * 8 / 1e9
        book("a", "qperf", "gbps").add(gbps)
        book("a", "qperf", "cpu_tx").add(num(r"send_cpus_used\s*=\s*([\d.]+)", so))
        book("a", "qperf", "cpu_rx").add(num(r"recv_cpus_used\s*=\s*([\d.]+)", so))

    rows = {netsweep: "netsweep", netsweep_uring: "netsweep uring",
            netsweep_shm: "netsweep shm (copy ceiling)", iperf3: "iperf3", nuttcp: "nuttcp",
            qperf: "qperf"}
    tools = list(rows)
    for i in range(runs):
        for t in rotate(tools, i):
            # shm moves no bytes through lo: its row has only its own figure.
            if t is netsweep_shm:
                t()
            else:
                lo_counted(book, rows[t], t)
        log(f"  round {i + 1}/{runs}: " + ", ".join(
            f"{k} {book.med('a', k, 'gbps') or 0:.1f} ({book.med('a', k, 'lo_gbps') or 0:.1f} "
            "by lo)" for k in ("netsweep", "iperf3", "nuttcp", "qperf"))
            + " Gbit/s (medians so far)")


# ---------------------------------------------------------------- (b) latency


def latency(ns, book, runs, secs, c_bin):
    for plabel, cc, sc in (SAME, SPLIT):
        pl = "same" if cc == sc else "split"
        log(f"b: 1-byte pingpong latency, {plabel}")

        def netsweep(proto):
            r = ns.run(["-t", proto, "-p", "pingpong", "--sizes", "1",
                        "--max-point-time", f"{secs}s"],
                       cpu=(cc, sc), taskset=cc if cc == sc else None)
            p = ns_point(r)
            if p:
                h = p["latency"]["half_rtt_ns"]
                book("b", pl, proto, "netsweep", "p50").add(h["p50"] / 1000)
                book("b", pl, proto, "netsweep", "mean").add(h["mean"] / 1000)
                # NetPIPE reports its best trial: 1 byte / best trial's Mbit/s.
                best = p["throughput_mbps"].get("max")
                if best:
                    book("b", pl, proto, "netsweep", "best").add(8 / best)

        def floor(proto):
            pt = port()
            srv = Server(pin(sc) + [c_bin, "server", proto, str(pt)], settle=0.1)
            n = "100000" if cc == sc else "30000"
            cmd = pin(cc) + [c_bin, "client", proto, HOST, str(pt), n, "1"]
            rc, so, se = sh(cmd, 60)
            srv.wait(5)
            med = num(r"median_ns=([\d.]+)", so)
            if med is None:
                return fail("C pingpong", cmd, se or so)
            book("b", pl, proto, "C floor", "p50").add(med / 1000)
            book("b", pl, proto, "C floor", "mean").add(num(r"mean_ns=([\d.]+)", so) / 1000)

        def sockperf(proto):
            pt = port()
            fl = ["--tcp"] if proto == "tcp" else []
            srv = Server(pin(sc) + ["sockperf", "sr"] + fl + ["-i", HOST, "-p", str(pt)],
                         settle=0.5, stop_signal=signal.SIGINT)
            # sockperf's smallest message is 14 bytes (its header).
            cmd = pin(cc) + ["sockperf", "pp"] + fl + ["-i", HOST, "-p", str(pt), "-t",
                                                        str(secs), "-m", "14"]
            rc, so, se = sh(cmd, secs + 20)
            srv.stop()
            out = so + se
            p50 = num(r"percentile 50\.000\s*=\s*([\d.]+)", out)
            if p50 is None:
                return fail("sockperf", cmd, out)
            book("b", pl, proto, "sockperf (14 B)", "p50").add(p50)
            book("b", pl, proto, "sockperf (14 B)", "mean").add(
                num(r"avg-latency=([\d.]+)", out))

        def qperf(_proto):
            pt = port()
            srv = Server(pin(sc) + ["qperf", "-lp", str(pt)])
            cmd = pin(cc) + ["qperf", HOST, "-lp", str(pt), "-t", str(secs), "-m", "1",
                             "tcp_lat", "udp_lat"]
            rc, so, se = sh(cmd, 2 * secs + 20)
            srv.stop()
            got = re.findall(r"^(tcp|udp)_lat:\s*\n\s*latency\s*=\s*([\d.]+)\s*(ns|us|ms)",
                             so, re.M)
            if not got:
                return fail("qperf", cmd, se or so)
            for proto, v, unit in got:
                us = float(v) * {"ns": 1e-3, "us": 1.0, "ms": 1e3}[unit]
                book("b", pl, proto, "qperf", "mean").add(us)

        def nptcp(_proto):
            pt = port()
            srv = Server(pin(sc) + ["NPtcp", "-P", str(pt)], settle=0.2)
            out = os.path.join(TMP, "np-lat.out")
            cmd = pin(cc) + ["NPtcp", "-h", HOST, "-P", str(pt), "-u", "2", "-o", out]
            rc, so, se = sh(cmd, 60)
            srv.wait(5)
            try:
                rows = [l.split() for l in open(out) if l.strip()]
                t = [float(r[2]) for r in rows if int(r[0]) == 1][0]
            except (OSError, ValueError, IndexError):
                return fail("NPtcp", cmd, se or so)
            book("b", pl, "tcp", "NPtcp (best trial)", "best").add(t * 1e6)

        tools = [lambda: netsweep("tcp"), lambda: netsweep("udp"), lambda: floor("tcp"),
                 lambda: floor("udp"), lambda: sockperf("tcp"), lambda: sockperf("udp"),
                 lambda: qperf("both"), lambda: nptcp("tcp")]
        for i in range(runs):
            for t in rotate(tools, i):
                t()
            log(f"  round {i + 1}/{runs}: tcp p50 netsweep "
                f"{book.med('b', pl, 'tcp', 'netsweep', 'p50') or 0:.2f} µs, C "
                f"{book.med('b', pl, 'tcp', 'C floor', 'p50') or 0:.2f} µs")


# ---------------------------------------------------------------- (c) UDP stream pps


def udp_stream(ns, book, runs, secs):
    log("c: UDP stream packets/s, client CPU 0, server CPU 1")
    for size in (64, 1472):
        def netsweep(api, size=size):
            extra = [] if api == "basic" else ["--api", api]
            if api in ("mmsg", "uring"):
                extra += ["--batch", "32"]
            r = ns.run(["-t", "udp", "-p", "stream", "--sizes", str(size), "--trial-time",
                        "200ms", "--min-trials", "5", "--max-point-time", f"{secs}s"] + extra,
                       cpu=(0, 1))
            p = ns_point(r)
            if p:
                tool = f"netsweep {api}"
                book("c", size, tool, "tx").add(p["sender_mbps"]["mean"] * 1e6 / 8 / size)
                book("c", size, tool, "rx").add(p["receiver_mbps"]["mean"] * 1e6 / 8 / size)
                book("c", size, tool, "loss").add(100 * (p.get("loss") or {}).get("ratio", 0))

        def iperf3(size=size):
            pt = port()
            srv = Server(pin(1) + ["iperf3", "-s", "-1", "-p", str(pt)])
            cmd = pin(0) + ["iperf3", "-c", HOST, "-p", str(pt), "-u", "-b", "0", "-l",
                            str(size), "-t", str(secs), "-J"]
            rc, so, se = sh(cmd, secs + 20)
            srv.wait(5)
            try:
                e = json.loads(so)["end"]
                tx = e["sum_sent"]["bytes"] / size / e["sum_sent"]["seconds"]
                rx = e["sum_received"]["bytes"] / size / e["sum_received"]["seconds"]
            except (ValueError, KeyError, TypeError, ZeroDivisionError) as x:
                return fail("iperf3", cmd, f"{x}: {se or so}")
            book("c", size, "iperf3 -u -b 0", "tx").add(tx)
            book("c", size, "iperf3 -u -b 0", "rx").add(rx)
            book("c", size, "iperf3 -u -b 0", "loss").add(100 * (1 - rx / tx) if tx else None)

        def sockperf(size=size):
            pt = port()
            srv = Server(pin(1) + ["sockperf", "sr", "-i", HOST, "-p", str(pt)], settle=0.5,
                         stop_signal=signal.SIGINT)
            cmd = pin(0) + ["sockperf", "tp", "-i", HOST, "-p", str(pt), "-t", str(secs), "-m",
                            str(size)]
            rc, so, se = sh(cmd, secs + 20)
            time.sleep(0.2)
            sout = srv.stop()
            out = so + se
            tx = num(r"Message Rate is (\d+)", out)
            got = num(r"Total (\d+) messages received", sout)
            if tx is None or got is None:
                return fail("sockperf", cmd, out + sout)
            # The server prints only a count: its rate assumes it received for the
            # client's whole test time.
            sent = num(r"Total of (\d+) messages sent in ([\d.]+) sec", out)
            dur = num(r"messages sent in ([\d.]+) sec", out) or secs
            book("c", size, "sockperf tp", "tx").add(tx)
            book("c", size, "sockperf tp", "rx").add(got / dur)
            book("c", size, "sockperf tp", "loss").add(100 * (1 - got / sent) if sent else None)

        tools = [lambda: netsweep("basic"), lambda: netsweep("mmsg"), lambda: netsweep("uring"),
                 lambda: netsweep("gso"), iperf3, sockperf]
        for i in range(runs):
            for t in rotate(tools, i):
                t()
        log(f"  {size} B: receiver pps median netsweep mmsg "
            f"{book.med('c', size, 'netsweep mmsg', 'rx') or 0:.0f}, iperf3 "
            f"{book.med('c', size, 'iperf3 -u -b 0', 'rx') or 0:.0f}")


# ---------------------------------------------------------------- (d) full sweep


def rel_halfwidth(values):
    """Relative 95% half-width of one run's value, from the spread over runs (t, n−1)."""
    t95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}
    if len(values) < 2:
        return None
    m = statistics.mean(values)
    return t95.get(len(values), 2.0) * statistics.stdev(values) / m if m else None


def sweep(ns, book, runs, quick):
    log("d: full default sweep, both ends on CPU 0")
    ns_curves, np_curves = [], []
    limit_ns = ["--max-size", "64k"] if quick else []
    limit_np = ["-u", "65536"] if quick else []

    def netsweep():
        r = ns.run(limit_ns, cpu=(0, 0), taskset=0, timeout=300)
        if r:
            d, wall = r
            pts = d["points"]
            book("d", "netsweep", "wall").add(wall)
            book("d", "netsweep", "points").add(len(pts))
            # A point of one trial has no interval (null): it counts as missing the target.
            achieved = [p["precision_achieved"] for p in pts]
            book("d", "netsweep", "prec").add(
                100 * statistics.median(a if a is not None else float("inf") for a in achieved))
            book("d", "netsweep", "met").add(100 * sum(p["precision_met"] for p in pts) / len(pts))
            ns_curves.append({p["size"]: p["throughput_mbps"]["mean"] for p in pts})

    def nptcp():
        pt = port()
        srv = Server(pin(0) + ["NPtcp", "-P", str(pt)], settle=0.2)
        out = os.path.join(TMP, "np-sweep.out")
        cmd = pin(0) + ["NPtcp", "-h", HOST, "-P", str(pt), "-o", out] + limit_np
        t0 = time.monotonic()
        rc, so, se = sh(cmd, 300)
        wall = time.monotonic() - t0
        srv.wait(5)
        try:
            rows = [l.split() for l in open(out) if l.strip()]
            curve = {int(r[0]): float(r[1]) for r in rows}
        except (OSError, ValueError, IndexError):
            return fail("NPtcp", cmd, se or so)
        if rc != 0 or not curve:
            return fail("NPtcp", cmd, se or so)
        book("d", "NPtcp", "wall").add(wall)
        book("d", "NPtcp", "points").add(len(curve))
        np_curves.append(curve)

    for i in range(runs):
        for t in rotate([netsweep, nptcp], i):
            t()
    # Repeatability: per size, the relative 95% half-width of one run's figure, estimated
    # from the spread over runs; the median over the sizes both tools measured.
    for name, curves in (("netsweep", ns_curves), ("NPtcp", np_curves)):
        common = set.intersection(*(set(c) for c in ns_curves + np_curves)) if (
            ns_curves and np_curves) else set()
        hw = [rel_halfwidth([c[s] for c in curves]) for s in sorted(common)]
        hw = [h for h in hw if h is not None]
        if hw:
            book("d", name, "repeat").add(100 * statistics.median(hw))
            book("d", name, "repeat90").add(100 * sorted(hw)[int(0.9 * (len(hw) - 1))])


# ---------------------------------------------------------------- (f) crr


def crr(ns, book, runs, secs, c_bin):
    """TCP connect/request/response/close, 1-byte request and response (netperf TCP_CRR)."""
    for plabel, cc, sc in (SAME, SPLIT):
        pl = "same" if cc == sc else "split"
        log(f"f: TCP crr, 1 B each way, {plabel}")

        def netsweep():
            r = ns.run(["-t", "tcp", "-p", "crr", "--sizes", "1", "--max-point-time", f"{secs}s"],
                       cpu=(cc, sc), taskset=cc if cc == sc else None)
            p = ns_point(r)
            if p:
                c = p["crr"]
                book("f", pl, "netsweep", "tps").add(c["transactions_per_sec"]["mean"])
                book("f", pl, "netsweep", "p50").add(c["transaction_ns"]["p50"] / 1000)
                book("f", pl, "netsweep", "connect").add(c["connect_ns"]["p50"] / 1000)

        def floor():
            pt = port()
            srv = Server(pin(sc) + [c_bin, "server", str(pt)], settle=0.1)
            n = str(10000 * secs)
            cmd = pin(cc) + [c_bin, "client", HOST, str(pt), n, "1"]
            rc, so, se = sh(cmd, 120)
            srv.stop()
            mean = num(r"mean_ns=([\d.]+)", so)
            if not mean:
                return fail("C crr", cmd, se or so)
            # Transactions/s as netsweep reports them: 1 s ÷ the mean transaction time.
            book("f", pl, "C floor", "tps").add(1e9 / mean)
            book("f", pl, "C floor", "p50").add(num(r"median_ns=([\d.]+)", so) / 1000)

        tools = [netsweep, floor]
        for i in range(runs):
            for t in rotate(tools, i):
                t()
            log(f"  round {i + 1}/{runs}: netsweep "
                f"{book.med('f', pl, 'netsweep', 'tps') or 0:.0f}/s, C "
                f"{book.med('f', pl, 'C floor', 'tps') or 0:.0f}/s (medians so far)")


# ---------------------------------------------------------------- item 5: scaling


def rate_lateness(ns, book, runs, secs):
    """(g) Open loop at 100k requests/s, udp 64 B, client CPU 0 (its sending and receiving
    threads), server CPU 1: netsweep -p rate's sender lateness beside sockperf's under-load
    mode (which reports the rate it achieved, not its lateness)."""
    log("g: open loop, udp 64 B at 100k requests/s")

    def netsweep():
        r = ns.run(["-t", "udp", "-p", "rate", "--rate", "100k", "--sizes", "64",
                    "--trial-time", "1s", "--max-point-time", f"{secs}s", "--min-trials", "2",
                    "--max-trials", "3"], cpu=(0, 1))
        p = ns_point(r)
        if not p:
            return
        rt, lat = p["rate"], p["latency"]["rtt_ns"]
        book("g", "netsweep", "late50").add(rt["lateness_ns"]["p50"] / 1000)
        book("g", "netsweep", "late99").add(rt["lateness_ns"]["p99"] / 1000)
        # Trials of 1 s: requests sent per second of schedule.
        book("g", "netsweep", "mps").add(rt["sent"] / max(p["trials"], 1))
        book("g", "netsweep", "p50").add(lat["p50"] / 1000)
        book("g", "netsweep", "p99").add(lat["p99"] / 1000)
        book("g", "netsweep", "loss").add(100 * rt["lost"] / max(rt["sent"], 1))

    def sockperf(every):
        name = "sockperf ul" if every == 100 else f"sockperf ul --reply-every {every}"
        pt = port()
        srv = Server(pin(1) + ["sockperf", "sr", "-i", HOST, "-p", str(pt)], settle=0.5,
                     stop_signal=signal.SIGINT)
        cmd = pin(0) + ["sockperf", "ul", "-i", HOST, "-p", str(pt), "-t", str(secs),
                        "--mps", "100000", "-m", "64", "--reply-every", str(every)]
        rc, so, se = sh(cmd, secs + 20)
        srv.stop()
        out = so + se
        m = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); "
                      r"ReceivedMessages=(\d+)", out)
        p50 = num(r"percentile 50\.000\s*=\s*([\d.]+)", out)
        if not m or p50 is None:
            return fail("sockperf ul", cmd, out)
        run_s, sent = float(m.group(1)), int(m.group(2))
        book("g", name, "mps").add(sent / run_s)
        book("g", name, "p50").add(p50)
        book("g", name, "p99").add(num(r"percentile 99\.000\s*=\s*([\d.]+)", out))
        dropped = num(r"# dropped messages = (\d+)", out)
        replied = num(r"ReceivedMessages=(\d+)", m.group(0))
        if dropped is not None and replied:
            book("g", name, "loss").add(100 * dropped / (dropped + replied))

    tools = [netsweep, lambda: sockperf(100), lambda: sockperf(1)]
    for i in range(runs):
        for t in rotate(tools, i):
            t()
        log(f"  round {i + 1}/{runs}: netsweep lateness p50 "
            f"{book.med('g', 'netsweep', 'late50') or 0:.2f} µs at "
            f"{book.med('g', 'netsweep', 'mps') or 0:.0f}/s; sockperf ul "
            f"{book.med('g', 'sockperf ul', 'mps') or 0:.0f}/s")


def scaling(ns, quick):
    """netsweep's own CPU time and max RSS (GNU time -v) vs size, run length, sweep length."""
    log("scaling: netsweep CPU and max RSS vs message size and run length")
    gt = shutil.which("time") or "/usr/bin/time"
    if not os.path.exists(gt):
        return None
    rows = []

    def one(label, args, timeout=300):
        out = os.path.join(TMP, "scale.json")
        cmd = [gt, "-v", ns.bin, "run"] + args + ["--cpu", "0,1", "-o", out, "--no-save", "-q"]
        t0 = time.monotonic()
        rc, so, se = sh(cmd, timeout)
        wall = time.monotonic() - t0
        if rc != 0:
            return fail("netsweep (scaling)", cmd, se)
        user = num(r"User time \(seconds\): ([\d.]+)", se)
        sys_ = num(r"System time \(seconds\): ([\d.]+)", se)
        rss = num(r"Maximum resident set size \(kbytes\): (\d+)", se, int)
        try:
            pts = json.load(open(out))["points"]
        except (OSError, ValueError, KeyError):
            pts = []
        size_kb = os.path.getsize(out) / 1024 if os.path.exists(out) else 0
        reps = sum(p.get("repetitions", 0) * p.get("trials", 0) for p in pts)
        rows.append((label, len(pts), reps, wall, user, sys_, rss, size_kb))

    sizes = ["1", "1k", "64k", "1M", "8M"] if not quick else ["1", "8M"]
    for s in sizes:
        one(f"tcp pingpong, 1 size = {s}", ["--sizes", s])
    for s in (["1", "64k", "8M"] if not quick else ["8M"]):
        one(f"tcp stream, 1 size = {s}", ["-p", "stream", "--sizes", s])
    one("udp stream mmsg 1472 B", ["-t", "udp", "-p", "stream", "--api", "mmsg", "--batch", "32",
                                   "--sizes", "1472"])
    for tt, mp in (("20ms", "300ms"), ("200ms", "3s")):
        one(f"tcp pingpong 1 B, --trial-time {tt} --max-point-time {mp}",
            ["--sizes", "1", "--trial-time", tt, "--max-point-time", mp])
    for n in ((10, 200) if not quick else (10,)):
        one(f"sweep of {n} sizes (1..{n} B, 60 ms per point)",
            ["--sizes", f"1..{n}:+1", "--max-point-time", "60ms"])
    return rows


# ---------------------------------------------------------------- profiles


def profile(ns, label, args, cpu):
    """A profile of a short netsweep run: perf (hardware or software clock) and/or callgrind."""
    out = []
    rc, so, se = sh(["perf", "stat", "-e", "instructions", "true"], 10)
    hw = rc == 0 and "not supported" not in se and "<not counted>" not in se
    if shutil.which("perf"):
        data = os.path.join(TMP, "perf.data")
        ev = [] if hw else ["-e", "cpu-clock"]
        cmd = ["perf", "record", "-q", "-g", "-o", data] + ev + [
            ns.bin, "run"] + args + ["--cpu", cpu, "--no-save", "-q", "-o",
                                     os.path.join(TMP, "prof.json")]
        rc, so, se = sh(cmd, 120)
        if rc == 0:
            rc, rep, se2 = sh(["perf", "report", "-i", data, "--no-children", "--stdio",
                               "--sort", "comm,dso,sym", "-g", "none", "--percent-limit",
                               "2"], 120)
            lines = [l for l in rep.splitlines() if l.strip() and not l.startswith("#")]
            out.append(f"perf record ({'cycles' if hw else 'cpu-clock: no hardware counters on this VM'}), "
                       f"`netsweep run {' '.join(args)} --cpu {cpu}`, symbols ≥ 2%:\n")
            out.append("```\n" + "\n".join(lines[:18]) + "\n```")
    if not hw and shutil.which("valgrind"):
        cg = os.path.join(TMP, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", ns.bin, "run"] + \
            args + ["--cpu", cpu, "--trial-time", "5ms", "--max-point-time", "100ms",
                    "--no-save", "-q", "-o", os.path.join(TMP, "cg.json")]
        rc, so, se = sh(cmd, 120)
        if rc == 0 and os.path.exists(cg):
            rc, ann, _ = sh(["callgrind_annotate", "--threshold=90", cg], 60)
            lines = [l for l in ann.splitlines() if re.match(r"^\s*[\d,]+ \(", l)]
            total = num(r"^([\d,]+) \(100", ann, lambda s: s.replace(",", ""))
            out.append(f"\ncallgrind (user-space instructions only; total {total}), top "
                       "functions:\n")
            out.append("```\n" + "\n".join(l[:150] for l in lines[:12]) + "\n```")
    return "\n".join(out)


# ---------------------------------------------------------------- the document


def machine():
    cpu = "?"
    try:
        for l in open("/proc/cpuinfo"):
            if l.startswith("model name"):
                cpu = l.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cc = open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip() if os.path.exists(
        "/proc/sys/net/ipv4/tcp_congestion_control") else "?"
    vers = {}
    for tool, cmd in (("iperf3", ["iperf3", "--version"]), ("sockperf", ["sockperf", "--version"]),
                      ("qperf", ["qperf", "--version"]), ("nuttcp", ["nuttcp", "-V"])):
        rc, so, se = sh(cmd, 10)
        vers[tool] = ((so or se).strip().splitlines() or ["?"])[0][:60]
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "kernel": os.uname().release,
        "cc": cc,
        "versions": vers,
    }


def ratio(a, b):
    return a / b if a is not None and b else None


def best_peer(book, keyfn, names, higher=True):
    vals = [(book.med(*keyfn(n)), n) for n in names]
    vals = [(v, n) for v, n in vals if v is not None]
    if not vals:
        return None, None
    return (max if higher else min)(vals)


def write_doc(path, book, scale_rows, args, mach, started, notes, profiles):
    L = []
    w = L.append
    w("# netsweep performance against its peers\n")
    w("<!-- Written by bench/peers; edit bench/notes.md (the analysis) or bench/peers.py, not "
      "this file. -->\n")
    w("Issue 6: netsweep's data path must not be the bottleneck. `bench/peers` runs netsweep and "
      "the Debian peer tools side by side on loopback (127.0.0.1 only), alternating tools "
      "round-robin, "
      f"{args.runs} run(s) each; every figure is the **median (min–max, n)** over runs, and every "
      "ratio is taken between medians of the same run of the script.\n")
    w("Rerun (as root; ~12 minutes; `--quick` for a 2-minute smoke run):\n")
    w("```sh\nbench/peers            # installs the peers, builds pingpong.c and netsweep, "
      "measures, rewrites docs/performance.md\n```\n")
    w("Many flows (`--flows`: aggregate stream against `iperf -P` and `iperf3 -P`, 16 pingpong "
      "flows against 16 C processes, memory per flow) are measured by `bench/flows.py` into "
      "[performance-flows.md](performance-flows.md). AF_XDP (`-t xdp`) against AF_PACKET on a "
      "veth pair between two namespaces, and the pktgen ceiling, are measured by `bench/xdp.py` "
      "into [performance-xdp.md](performance-xdp.md). The lab's path emulator's ceiling "
      "(frames/s and Gbit/s at MTU 1500 and 9000, against a plain veth) is measured by "
      "`bench/emulator.py` into [performance-emulator.md](performance-emulator.md). Whether "
      "the tools do the same work on the single stream (a) — system calls and bytes per call "
      "on each end, wake-ups, CPU, socket buffers, from `perf stat` and the kernel — is "
      "measured by `bench/stream-counters.py` into "
      "[performance-stream-counters.md](performance-stream-counters.md).\n")
    cc_set = " (set for this run by `--cc`: every tool uses it)" if args.cc else ""
    w(f"Machine: {mach['nproc']} CPUs, {mach['cpu']}, Linux {mach['kernel']}, default congestion "
      f"control `{mach['cc']}`{cc_set}. Run {started}, {'quick' if args.quick else 'full'} mode, "
      f"{time.strftime('%M:%S', time.gmtime(time.time() - args.t0))} min:s. Peers: "
      + ", ".join(f"{k} `{v}`" for k, v in mach["versions"].items()) + ", NPtcp 3.7.2.\n")
    w("**Placement.** On this VM a loopback round trip costs ≈3 µs RTT/2 with both ends on one "
      "CPU and ≈15–40 µs (bimodal) across CPUs, so every tool is pinned identically: stream "
      "tests (a, c, e) run the client on CPU 0 and the server on CPU 1 (`taskset -c 0` / "
      "`taskset -c 1`; netsweep `--cpu 0,1`); latency (b) is measured twice, both ends on CPU 0 "
      "(`taskset -c 0` for both; netsweep `taskset -c 0 … --cpu 0`) and split 0/1, and so is "
      "crr (f); the sweep (d) runs both ends on CPU 0.\n")

    # ---- targets
    rows = []  # (item, target, measured, ratio, ok, key)
    # a
    peers_a = ("iperf3", "nuttcp", "qperf")
    # Judged by the loopback counter over the same kind of window for every tool (each
    # tool's own figure is over a window of its choosing: netsweep its trials, the peers
    # their whole test); the tools' own figures are in section a's table.
    bv, bn = best_peer(book, lambda n: ("a", n, "lo_gbps"), peers_a)
    r = ratio(book.med("a", "netsweep", "lo_gbps"), bv)
    rows.append(("a. TCP stream Gbit/s (loopback counter)", "≥ 1.0 × best peer",
                 f"netsweep {book('a', 'netsweep', 'lo_gbps').fmt(1)} vs {bn} "
                 f"{book('a', bn, 'lo_gbps').fmt(1) if bn else 'n/a'}", r,
                 r is not None and r >= 1.0, "a"))
    # b
    for pl in ("same", "split"):
        for proto in ("tcp", "udp"):
            ns50 = book.med("b", pl, proto, "netsweep", "p50")
            c50 = book.med("b", pl, proto, "C floor", "p50")
            r1 = ratio(ns50, c50)
            rows.append((f"b. {proto.upper()} 1 B RTT/2 p50, {pl} CPU", "≤ 1.05 × C floor",
                         f"netsweep {book('b', pl, proto, 'netsweep', 'p50').fmt(2)} µs vs C "
                         f"{book('b', pl, proto, 'C floor', 'p50').fmt(2)} µs", r1,
                         r1 is not None and r1 <= 1.05, f"b-{pl}"))
            # Best peer, statistic for statistic: p50 vs sockperf's p50, mean vs qperf's mean,
            # best trial vs NPtcp's best trial.
            cands = []
            for peer, stat in (("sockperf (14 B)", "p50"), ("qperf", "mean"),
                               ("NPtcp (best trial)", "best")):
                pv = book.med("b", pl, proto, peer, stat)
                nv = book.med("b", pl, proto, "netsweep", stat)
                if pv and nv:
                    cands.append((nv / pv, peer, stat, nv, pv))
            if cands:
                worst = max(cands)
                rows.append((f"b. {proto.upper()} 1 B RTT/2, {pl} CPU", "≤ best peer",
                             "; ".join(f"{s} {n:.2f} vs {p} {v:.2f} µs" for _, p, s, n, v in cands),
                             worst[0], worst[0] <= 1.0, f"b-{pl}"))
    # c
    for size in (64, 1472):
        ir = book.med("c", size, "iperf3 -u -b 0", "rx")
        r = ratio(book.med("c", size, "netsweep mmsg", "rx"), ir)
        tgt = "≥ 2 × iperf3 receiver" if size == 64 else "(no target) vs iperf3 receiver"
        rows.append((f"c. UDP {size} B receiver pkt/s, mmsg", tgt,
                     f"netsweep mmsg {book('c', size, 'netsweep mmsg', 'rx').fmt(0)} vs iperf3 "
                     f"{book('c', size, 'iperf3 -u -b 0', 'rx').fmt(0)}", r,
                     (r is not None and r >= 2.0) if size == 64 else None, "c"))
    # c, gso (issue 17): UDP_SEGMENT sends and UDP_GRO receives, both sizes against iperf3.
    for size in (64, 1472):
        ir = book.med("c", size, "iperf3 -u -b 0", "rx")
        r = ratio(book.med("c", size, "netsweep gso", "rx"), ir)
        rows.append((f"c. UDP {size} B receiver pkt/s, gso", "≥ 2 × iperf3 receiver",
                     f"netsweep gso {book('c', size, 'netsweep gso', 'rx').fmt(0)} vs iperf3 "
                     f"{book('c', size, 'iperf3 -u -b 0', 'rx').fmt(0)}", r,
                     r is not None and r >= 2.0, "c"))
    # d
    r = ratio(book.med("d", "netsweep", "wall"), book.med("d", "NPtcp", "wall"))
    rp = ratio(book.med("d", "netsweep", "repeat"), book.med("d", "NPtcp", "repeat"))
    rows.append(("d. default sweep wall time", "< NPtcp",
                 f"netsweep {book('d', 'netsweep', 'wall').fmt(1)} s vs NPtcp "
                 f"{book('d', 'NPtcp', 'wall').fmt(1)} s", r, r is not None and r < 1.0, "d"))
    rows.append(("d. … at equal or better precision", "repeatability ≤ NPtcp's",
                 f"netsweep ±{book.med('d', 'netsweep', 'repeat') or float('nan'):.1f}% vs NPtcp "
                 f"±{book.med('d', 'NPtcp', 'repeat') or float('nan'):.1f}% (median over sizes)",
                 rp, rp is not None and rp <= 1.0, "d"))
    # e
    for side, key in (("sender", "sd_tx"), ("receiver", "sd_rx")):
        r = ratio(book.med("e", "netsweep", key), book.med("e", "iperf3", key))
        rows.append((f"e. service demand, {side}", "≤ iperf3",
                     f"netsweep {book('e', 'netsweep', key).fmt(3)} vs iperf3 "
                     f"{book('e', 'iperf3', key).fmt(3)} µs/KiB", r, r is not None and r <= 1.0,
                     "e"))

    # g
    if "g" in args.only:
        late = book.med("g", "netsweep", "late50")
        rows.append(("g. rate 100k/s: sender lateness p50", "< 10 µs (ratio: ÷ 10 µs)",
                     f"netsweep {book('g', 'netsweep', 'late50').fmt(2)} µs",
                     ratio(late, 10.0), late is not None and late < 10.0, "g"))
    # f
    for pl in ("same", "split"):
        r = ratio(book.med("f", pl, "netsweep", "tps"), book.med("f", pl, "C floor", "tps"))
        rows.append((f"f. TCP crr 1 B transactions/s, {pl} CPU", "≥ 0.95 × C floor",
                     f"netsweep {book('f', pl, 'netsweep', 'tps').fmt(0)} vs C "
                     f"{book('f', pl, 'C floor', 'tps').fmt(0)}", r,
                     r is not None and r >= 0.95, f"f-{pl}"))

    w("## Targets\n")
    w("| item | target | measured (median (min–max, n)) | ratio | |")
    w("|---|---|---|---|---|")
    rows = [(i, t, m, r, None if r is None and ok is not None else ok, k)
            for i, t, m, r, ok, k in rows]
    for item, tgt, meas, r, ok, _ in rows:
        mark = "—" if ok is None else ("met" if ok else "**missed**")
        w(f"| {item} | {tgt} | {meas} | {'n/a' if r is None else f'{r:.2f}'} | {mark} |")
    w("")

    # ---- details
    w("## a. TCP stream, one flow, 128 KiB messages (client CPU 0, server CPU 1)\n")
    w("| tool | Gbit/s, loopback counter | Gbit/s, its own figure | sender CPU % | "
      "receiver CPU % |")
    w("|---|---|---|---|---|")
    for t in ("netsweep", "netsweep uring", "iperf3", "nuttcp", "qperf",
              "netsweep shm (copy ceiling)"):
        w(f"| {t} | {book('a', t, 'lo_gbps').fmt(1)} | {book('a', t, 'gbps').fmt(1)} | "
          f"{book('a', t, 'cpu_tx').fmt(0)} | {book('a', t, 'cpu_rx').fmt(0)} |")
    w("\nThe loopback counter: `/sys/class/net/lo/statistics/rx_bytes` read every 50 ms while "
      "each tool runs, the median over the 50 ms windows that carried at least a fifth of the "
      "busiest one's bytes (headers included): one window for every tool. Its own figure: "
      "netsweep's over its timed trials, iperf3's `sum_received`, nuttcp's and qperf's over "
      "their whole test. The target is judged on the counter.")
    best_a, best_n = best_peer(book, lambda n: ("a", n, "lo_gbps"), ("iperf3", "nuttcp", "qperf"))
    ns_a, peer_a = book("a", "netsweep", "lo_gbps"), book("a", best_n, "lo_gbps") if best_n else None
    if best_a and ns_a.v and peer_a and peer_a.v:
        inside = (min(peer_a.v) <= ns_a.med() <= max(peer_a.v)
                  and min(ns_a.v) <= peer_a.med() <= max(ns_a.v))
        w(f"By the counter netsweep's median is {ns_a.med() / best_a:.2f}× {best_n}'s"
          + (f"; each median lies inside the other's range over the {len(ns_a.v)} rounds, so the "
             "two medians differ by less than the run-to-run spread." if inside else
             ": the difference is larger than either's range over the rounds."))
    w("\nCPU as each tool reports it: netsweep the data thread's time over its active time; "
      "iperf3 and nuttcp the process's; qperf `*_cpus_used` (whole-machine, so two busy CPUs "
      "read 200%).\n")
    w("## b. 1-byte pingpong latency, RTT/2 in µs\n")
    w("netsweep: `-p pingpong --sizes 1`, p50 and mean from its histogram of every round trip, "
      "`best` = its best trial (1 byte ÷ the trial's Mbit/s, NetPIPE's figure). C floor: "
      "bench/c/pingpong.c. sockperf cannot send fewer than 14 bytes. qperf reports a mean; "
      "NPtcp its best trial, TCP only.\n")
    for pl, label in (("same", SAME[0]), ("split", SPLIT[0])):
        w(f"### {label}\n")
        w("| tool | TCP p50 | TCP mean | TCP best trial | UDP p50 | UDP mean |")
        w("|---|---|---|---|---|---|")
        for t in ("netsweep", "C floor", "sockperf (14 B)", "qperf", "NPtcp (best trial)"):
            w(f"| {t} | " + " | ".join(book("b", pl, p, t, s).fmt(2) for p, s in (
                ("tcp", "p50"), ("tcp", "mean"), ("tcp", "best"), ("udp", "p50"),
                ("udp", "mean"))) + " |")
        w("")
    w("## c. UDP stream, packets per second (client CPU 0, server CPU 1)\n")
    w("netsweep `basic`, `mmsg --batch 32`, `uring --batch 32` (io_uring, one io_uring_enter "
      "per 32 datagrams), `gso` (UDP_SEGMENT: up to 64 datagrams per sendmsg; UDP_GRO "
      "receives); `iperf3 -u -b 0 -l SIZE`; `sockperf tp -m SIZE` "
      "(its server prints only a count: its rate assumes it received for the whole test).\n")
    w("| size | tool | sender pkt/s | receiver pkt/s | loss % |")
    w("|---|---|---|---|---|")
    for size in (64, 1472):
        for t in ("netsweep basic", "netsweep mmsg", "netsweep uring", "netsweep gso",
                  "iperf3 -u -b 0",
                  "sockperf tp"):
            w(f"| {size} | {t} | {book('c', size, t, 'tx').fmt(0)} | "
              f"{book('c', size, t, 'rx').fmt(0)} | {book('c', size, t, 'loss').fmt(1)} |")
    w("")
    w("## d. Full default sweep (both ends on CPU 0)\n")
    w("netsweep's default sweep (`netsweep run`, NetPIPE's perturbed schedule, 2% precision "
      "target, 300 ms per point) vs NPtcp's default sweep (`NPtcp -h 127.0.0.1`). Precision: "
      "netsweep's own 95% CI half-width per point (median over points, and the share of points "
      "that met the target); repeatability for both tools: per size, the relative 95% "
      "half-width of one run's throughput estimated from the spread over runs "
      "(t·s/mean), median and 90th percentile over the sizes both measured.\n")
    w("| tool | wall s | points | CI half-width (median) | points meeting 2% | repeatability "
      "median | repeatability p90 |")
    w("|---|---|---|---|---|---|---|")
    for t in ("netsweep", "NPtcp"):
        w(f"| {t} | {book('d', t, 'wall').fmt(1)} | {book('d', t, 'points').fmt(0)} | "
          f"{book('d', t, 'prec').fmt(2) + ' %' if t == 'netsweep' else 'not reported'} | "
          f"{book('d', t, 'met').fmt(0) + ' %' if t == 'netsweep' else '—'} | "
          f"{book('d', t, 'repeat').fmt(2)} % | {book('d', t, 'repeat90').fmt(2)} % |")
    w("")
    w("## e. Service demand, TCP stream (CPU µs per KiB moved)\n")
    w("| tool | sender | receiver |")
    w("|---|---|---|")
    for t in ("netsweep", "iperf3"):
        w(f"| {t} | {book('e', t, 'sd_tx').fmt(3)} | {book('e', t, 'sd_rx').fmt(3)} |")
    w("\niperf3's from its `--json` `cpu_utilization_percent` (process CPU over the test) × "
      "duration ÷ KiB received; netsweep's per side from the data thread's CPU time.\n")

    w("## f. TCP connect/request/response/close (crr), 1 byte each way\n")
    w("netsweep `-t tcp -p crr --sizes 1` (transactions/s = 1 s ÷ each trial's mean "
      "transaction, averaged over trials; times from its histogram of every transaction) vs "
      "bench/c/crr.c, a plain C loop of socket, connect, send, recv, close per transaction "
      "against a plain C accept, recv, send, recv-until-close, close server (1 s ÷ its mean "
      "transaction). netsweep's client also sets TCP_NODELAY (its default) and SO_SNDTIMEO/"
      "SO_RCVTIMEO (every wait on a peer is bounded) on each socket; the C client sets "
      "nothing.\n")
    w("| placement | tool | transactions/s | transaction p50 µs | connect p50 µs |")
    w("|---|---|---|---|---|")
    for pl, label in (("same", SAME[0]), ("split", SPLIT[0])):
        for t in ("netsweep", "C floor"):
            w(f"| {label} | {t} | {book('f', pl, t, 'tps').fmt(0)} | "
              f"{book('f', pl, t, 'p50').fmt(1)} | "
              f"{book('f', pl, t, 'connect').fmt(1) if t == 'netsweep' else '—'} |")
    w("")

    if "g" in args.only:
        w("## g. Open loop: udp 64 B at 100k requests/s (client CPU 0, server CPU 1)\n")
        w("netsweep `-t udp -p rate --rate 100k --sizes 64 --trial-time 1s --cpu 0,1` (one "
          "client thread on CPU 0 sends on the schedule and reads the echoes between sends) beside `sockperf ul --mps 100000 -m 64` "
          "(`taskset -c 0`; its server `sockperf sr` on CPU 1), as sockperf runs by default "
          "(its server answers one request in 100) and answering every request as netsweep does "
          "(`--reply-every 1`: the same work). Lateness is actual − intended send time of every "
          "request (sockperf does not report it: its achieved rate is the comparable figure); "
          "latency is netsweep's reply − intended send time of every request, sockperf's RTT "
          "of the requests its server answers, from their actual send time. Loss: netsweep's "
          "lost requests, sockperf's dropped replies.\n")
        w("| tool | requests sent per s | sender lateness p50 µs | lateness p99 µs | "
          "latency p50 µs | latency p99 µs | loss % |")
        w("|---|---|---|---|---|---|---|")
        for t in ("netsweep", "sockperf ul", "sockperf ul --reply-every 1"):
            late = (book("g", t, "late50").fmt(2), book("g", t, "late99").fmt(1)) \
                if t == "netsweep" else ("—", "—")
            w(f"| {t} | {book('g', t, 'mps').fmt(0)} | {late[0]} | {late[1]} | "
              f"{book('g', t, 'p50').fmt(1)} | {book('g', t, 'p99').fmt(1)} | "
              f"{book('g', t, 'loss').fmt(2)} |")
        w("")

    missed = sorted({k for *_, ok, k in rows if ok is False})
    w("## Missed targets: what limited them, and what would close them\n")
    if not missed:
        w("Every target was met in this run.\n")
    for k in missed:
        w(f"### {k}\n")
        w(notes.get(k, "(no analysis in bench/notes.md for this target yet)").strip() + "\n")
        if profiles.get(k):
            w("Profile taken by this run:\n")
            w(profiles[k] + "\n")

    w("## Scaling: netsweep's own CPU and memory (issue 6 item 5)\n")
    if scale_rows:
        w("Each row is one `netsweep run … --cpu 0,1` under `/usr/bin/time -v` (in-process "
          "server, so both ends are in the figures).\n")
        w("| run | points | repetitions | wall s | user s | sys s | max RSS MiB | results KiB |")
        w("|---|---|---|---|---|---|---|---|")
        for label, pts, reps, wall, u, s, rss, kb in scale_rows:
            w(f"| {label} | {pts} | {reps} | {wall:.2f} | {u or 0:.2f} | {s or 0:.2f} | "
              f"{(rss or 0) / 1024:.1f} | {kb:.0f} |")
        w("")
    w(notes.get("scaling", "").strip() + "\n")
    if LOG:
        w("## Runs that failed in this run\n")
        for tool, cmd, why in LOG:
            w(f"- {tool}: `{cmd}`: {why.splitlines()[-1] if why else '?'}")
        w("")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return rows


def load_notes(path):
    """bench/notes.md: sections `## key` of hand-written analysis, keyed by target."""
    notes, key, buf = {}, None, []
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r"^## (\S+)\s*$", line)
            if m:
                if key:
                    notes[key] = "".join(buf)
                key, buf = m.group(1), []
            elif key:
                buf.append(line)
        if key:
            notes[key] = "".join(buf)
    return notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--netsweep", required=True)
    ap.add_argument("--pingpong", required=True)
    ap.add_argument("--crr", required=True, help="bench/c/crr.c, built")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--only", default="abcdfgs",
                    help="sections to run: a,b,c,d,f (crr),g (rate lateness),s (scaling)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--cc", help="the host's default TCP congestion control for the run "
                    "(net.ipv4.tcp_congestion_control, restored after): every tool then uses "
                    "it, where only netsweep and iperf3 can choose their own")
    args = ap.parse_args()
    CC = "/proc/sys/net/ipv4/tcp_congestion_control"
    before = open(CC).read().strip() if args.cc else None
    if args.cc:
        with open(CC, "w") as f:
            f.write(args.cc)
        log(f"congestion control {args.cc} for the run (was {before})")
    try:
        run_all(args)
    finally:
        if before:
            with open(CC, "w") as f:
                f.write(before)


def run_all(args):
    args.t0 = time.time()
    args.runs = args.runs or (1 if args.quick else 5)
    secs = 1 if args.quick else 2
    started = time.strftime("%Y-%m-%d %H:%M")
    ns = Netsweep(args.netsweep)
    book = Book()
    mach = machine()
    try:
        if "a" in args.only:
            stream_tcp(ns, book, args.runs, secs)
        if "b" in args.only:
            latency(ns, book, args.runs, secs, args.pingpong)
        if "c" in args.only:
            udp_stream(ns, book, args.runs, secs)
        if "d" in args.only:
            sweep(ns, book, max(args.runs, 2) if not args.quick else 1, args.quick)
        if "f" in args.only:
            crr(ns, book, args.runs, secs, args.crr)
        if "g" in args.only:
            rate_lateness(ns, book, args.runs, secs)
        scale_rows = scaling(ns, args.quick) if "s" in args.only else None
    except KeyboardInterrupt:
        log("interrupted: writing what was measured")
        scale_rows = None
    notes = load_notes(os.path.join(ROOT, "bench", "notes.md"))
    rows = write_doc(args.out, book, scale_rows, args, mach, started, notes, {})
    missed = sorted({k for *_, ok, k in rows if ok is False})
    if missed and not args.quick and (shutil.which("perf") or shutil.which("valgrind")):
        profiles = {}
        for k in missed:
            log(f"profiling for missed target {k}")
            if k == "a" or k == "e":
                profiles[k] = profile(ns, k, ["-t", "tcp", "-p", "stream", "--sizes", "128k"],
                                      "0,1")
            elif k.startswith("b"):
                profiles[k] = profile(ns, k, ["-t", "tcp", "--sizes", "1"],
                                      "0" if k == "b-same" else "0,1")
            elif k == "c":
                profiles[k] = profile(ns, k, ["-t", "udp", "-p", "stream", "--sizes", "64",
                                              "--api", "mmsg", "--batch", "32"], "0,1")
            elif k.startswith("f"):
                profiles[k] = profile(ns, k, ["-t", "tcp", "-p", "crr", "--sizes", "1"],
                                      "0" if k == "f-same" else "0,1")
            elif k == "d":
                profiles[k] = profile(ns, k, ["--sizes", "1,1k,64k"], "0")
        if not args.quick:
            rows = write_doc(args.out, book, scale_rows, args, mach, started, notes, profiles)
    log(f"wrote {args.out}")
    for item, tgt, meas, r, ok, _ in rows:
        mark = "" if ok is None else ("met" if ok else "MISSED")
        log(f"  {item:45} {tgt:28} ratio {'n/a' if r is None else f'{r:.2f}':>5}  {mark}")
    shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
