"""bench/mpi.py — measures netsweep -t mpi against bench/c/mpi_osu.c (see bench/mpi)."""
import argparse, json, re, statistics, subprocess, tempfile, datetime, pathlib

MPIRUN = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2"]


def osu(binary, mode, size, *extra):
    out = subprocess.run(MPIRUN + [binary, mode, str(size), "2", *extra], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    return float(out.split()[-1])


def netsweep(binary, pattern, size):
    with tempfile.TemporaryDirectory() as d:
        f = pathlib.Path(d) / "r.json"
        subprocess.run(MPIRUN + [binary, "run", "-t", "mpi", "-p", pattern, "--sizes", str(size),
                                 "--trial-time", "100ms", "--max-point-time", "3s",
                                 "--no-save", "-q", "-o", str(f)],
                       check=True, capture_output=True, timeout=120)
        p = json.loads(f.read_text())["points"][0]
    if pattern == "pingpong":
        return p["latency"]["half_rtt_ns"]["mean"] / 1000.0
    return p["receiver_mbps"]["mean"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--netsweep", required=True)
    ap.add_argument("--osu", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-doc", action="store_true")
    a = ap.parse_args()
    rows = [("1 B latency, µs (mean of RTT/2)", "latency", 1, "pingpong", 1, False),
            ("1 MiB bandwidth, Mbit/s", "bw", 1 << 20, "stream", 1 << 20, True)]
    lines = []
    for label, mode, osize, pattern, nsize, higher in rows:
        # The latency row also runs the floor with bounded calls (mpi_osu bounded: every
        # wait polled with a timeout, every round trip timed) at MPI's default thread level
        # and at SERIALIZED, netsweep's: what netsweep's calls cost without netsweep.
        o, b, s, n = [], [], [], []
        for _ in range(a.runs):
            o.append(osu(a.osu, mode, osize))
            if not higher:
                b.append(osu(a.osu, "bounded", osize))
                s.append(osu(a.osu, "bounded", osize, "serialized"))
            n.append(netsweep(a.netsweep, pattern, nsize))
        mo, mn = statistics.median(o), statistics.median(n)
        ratio = mn / mo if higher else mo / mn
        cell = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}–{max(v):.3f})" if v else "—"
        near = f"; netsweep ÷ it {statistics.median(s) / mn:.3f}" if s else ""
        lines.append(f"| {label} | {cell(o)} | {cell(b)} | {cell(s)}{near} | {cell(n)} | "
                     f"{ratio:.3f} |")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = ("| figure | MPI floor (osu calls), median (min–max) | floor, bounded calls "
             "(`mpi_osu bounded`) | floor, bounded calls at SERIALIZED | netsweep -t mpi | "
             "netsweep ÷ floor (≥ 1 is as good) |\n|---|---|---|---|---|---|\n" +
             "\n".join(lines) +
             f"\n\nMeasured {when}, {a.runs} alternating runs each, `flock "
             "/tmp/netsweep-bench.lock bench/mpi`.\n")
    print(table)
    if not a.no_doc:
        doc = pathlib.Path("docs/mpi.md")
        text = doc.read_text()
        start, end = "<!-- bench/mpi start -->\n", "<!-- bench/mpi end -->"
        i, j = text.index(start) + len(start), text.index(end)
        doc.write_text(text[:i] + table + text[j:])


main()
