#!/usr/bin/env bash
# Seed 004, Figure 8: NetPIPE's signature graphs of MPI beside TCP on the same machines — what
# a message-passing layer costs. Four pingpong sweeps on this host, overlaid:
#   mpi-tcp   MPI forced onto its TCP transport (mpirun --mca btl tcp,self), as the seed's MPI
#             was "based on TCP"
#   tcp       netsweep's own tcp over the same path (loopback)
#   mpi-shm   MPI as it chooses on one host (shared memory)
#   shm       netsweep's shared-memory ring (the in-host copy ceiling)
# Writes the results, SVG plots, an HTML report and tables.md (the figures at five sizes) to
# DIR; without DIR, to /tmp/netsweep-004-mpi-vs-tcp, then copies the plots and tables.md that
# docs/experiments/004-mpi-vs-tcp.md shows into docs/experiments/004-mpi-vs-tcp/.
#
#   flock /tmp/netsweep-bench.lock scenarios/seeds/004-mpi-vs-tcp.sh [DIR]
#
# Needs Open MPI and libclang (apt-get install openmpi-bin libopenmpi-dev libclang-dev); as
# root Open MPI needs OMPI_ALLOW_RUN_AS_ROOT*, set below. Takes about 2 minutes.
# NETSWEEP_BIN (a netsweep built with --features mpi: no build then) and NETSWEEP_SIZES (the
# sweep, default 1..4m:*2) let tests/mpi.rs run a short version.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/netsweep-004-mpi-vs-tcp}
page=${1:+}
[ -n "${1:-}" ] || page=docs/experiments/004-mpi-vs-tcp
mkdir -p "$out"
if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
ns=${NETSWEEP_BIN:-}
if [ -z "$ns" ]; then
  cargo build --release --quiet --features mpi --bin netsweep
  ns=target/release/netsweep
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sweep=(-p pingpong --sizes "${NETSWEEP_SIZES:-1..4m:*2}" --max-point-time 400ms --no-save -q)
mpirun=(mpirun --oversubscribe --bind-to none -np 2)
"${mpirun[@]}" --mca btl tcp,self "$ns" run -t mpi "${sweep[@]}" -o "$out/mpi-tcp.json"
"$ns" run -t tcp --cpu free "${sweep[@]}" -o "$out/tcp.json"
"${mpirun[@]}" "$ns" run -t mpi "${sweep[@]}" -o "$out/mpi-shm.json"
"$ns" run -t shm --cpu free "${sweep[@]}" -o "$out/shm.json"
rm -rf "$out/plots"
"$ns" report "$out/mpi-tcp.json" "$out/tcp.json" "$out/mpi-shm.json" "$out/shm.json" \
  --svg "$out/plots" --html "$out/report.html"
for f in mpi-tcp tcp mpi-shm shm; do
  echo "== $f"; "$ns" report "$out/$f.json" | tail -4
done
{
  echo "# Seed 004, MPI vs TCP: the figures of the last run"
  echo
  echo "Run of scenarios/seeds/004-mpi-vs-tcp.sh on $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs."
  echo
  python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
sizes = [1, 1024, 65536, 1048576, 4194304]
print("| run | " + " | ".join(f"{s} B: RTT/2 p50, Mbit/s" for s in sizes) + " | CPU client/server at 1 B |")
print("|---|" + "---|" * (len(sizes) + 1))
for name in ["mpi-tcp", "tcp", "mpi-shm", "shm"]:
    run = json.load(open(f"{out}/{name}.json"))
    points = {p["size"]: p for p in run["points"]}
    cells = []
    for s in sizes:
        p = points.get(s)
        cells.append("—" if p is None else "%.2f µs, %.0f" % (
            p["latency"]["half_rtt_ns"]["p50"] / 1000, p["throughput_mbps"]["mean"]))
    p = points[1]
    cpu = "%.2f / %.2f" % (p["client"]["cpu_utilisation"], p["server"]["cpu_utilisation"])
    print(f"| {name} | " + " | ".join(cells) + f" | {cpu} |")
PY
} >"$out/tables.md"
if [ -n "$page" ]; then
  mkdir -p "$page"
  cp "$out/plots/latency.svg" "$out/plots/throughput.svg" "$out/plots/signature.svg" \
    "$out/tables.md" "$page/"
fi
