//! Cluster meshes (`netsweep mesh` under `mpirun -np N`): which rank measures which in each
//! round of a layout, the results file of a mesh (every pair's run plus N×N matrices per
//! size), and the pairs and hosts that stand out from the others. No IO.

use crate::results::{RunResult, RunStatus, ToolInfo};
use crate::spec::RunSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Value of a mesh file's `schema` field.
pub const SCHEMA: &str = "netsweep-mesh";
/// Current `schema_version` of mesh files.
pub const SCHEMA_VERSION: u32 = 1;

/// A pair is flagged when its throughput is below this fraction of the median of the other
/// pairs at the same size: "well below", not run-to-run noise — on one shared 2-CPU host the
/// pairs of a mesh differ by up to 2.7× with nothing wrong (measured: docs/mesh.md).
pub const FLAG_RATIO: f64 = 0.25;

/// Who measures whom, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Every pair once, as a round-robin tournament: N−1 rounds (N rounds for odd N) of
    /// disjoint pairs, so no host is in two flows at once.
    Pairs,
    /// Each rank to its right neighbour (i → i+1 mod N), all at once.
    Ring,
    /// Every other rank to rank 0, all at once.
    Incast,
    /// The lower half to the upper half (i → i + N/2), all at once.
    Bisection,
}

impl Layout {
    /// Every layout, in listing order.
    pub const ALL: [Layout; 4] = [
        Layout::Pairs,
        Layout::Ring,
        Layout::Incast,
        Layout::Bisection,
    ];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Pairs => "pairs",
            Layout::Ring => "ring",
            Layout::Incast => "incast",
            Layout::Bisection => "bisection",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One measured flow: `client` runs the sweep against `server`'s server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Flow {
    /// The measuring rank.
    pub client: u32,
    /// The serving rank.
    pub server: u32,
}

/// The rounds of `layout` over `n` ranks: flows in one round run at once, rounds one after
/// the other. Empty for fewer than two ranks.
pub fn schedule(layout: Layout, n: u32) -> Vec<Vec<Flow>> {
    if n < 2 {
        return Vec::new();
    }
    let flow = |client, server| Flow { client, server };
    match layout {
        Layout::Pairs => round_robin(n),
        Layout::Ring => vec![(0..n).map(|i| flow(i, (i + 1) % n)).collect()],
        Layout::Incast => vec![(1..n).map(|i| flow(i, 0)).collect()],
        Layout::Bisection => vec![(0..n / 2).map(|i| flow(i, i + n / 2)).collect()],
    }
}

/// The circle method: rank 0 (or the bye, for odd `n`) stays put and the others rotate; each
/// round pairs position k with position m−1−k. The lower rank of a pair measures.
fn round_robin(n: u32) -> Vec<Vec<Flow>> {
    let m = n + n % 2; // with a bye for odd n: the bye's partner sits the round out
    let mut ring: Vec<u32> = (0..m).collect();
    let mut rounds = Vec::new();
    for _ in 0..m - 1 {
        let mut round = Vec::new();
        for k in 0..(m / 2) as usize {
            let (a, b) = (ring[k], ring[m as usize - 1 - k]);
            if a < n && b < n {
                round.push(Flow {
                    client: a.min(b),
                    server: a.max(b),
                });
            }
        }
        rounds.push(round);
        // Keep ring[0], rotate the rest by one.
        let last = ring.pop().unwrap_or(0);
        ring.insert(1, last);
    }
    rounds
}

/// One rank of the mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RankInfo {
    /// Its rank in the MPI world.
    pub rank: u32,
    /// Its host (MPI processor name, or the lab host it measured from).
    pub host: String,
    /// Where its server listened.
    pub addr: String,
}

/// One flow's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PairResult {
    /// The round it ran in (from 0).
    pub round: u32,
    /// Who measured whom.
    pub flow: Flow,
    /// The run, as far as it got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
    /// Why the run failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The N×N matrices of one message size: cell `[client][server]`, `None` where not measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizeMatrix {
    /// Message size, bytes.
    pub size: u64,
    /// Median one-way latency (RTT/2, pingpong) or connect time (crr), microseconds.
    pub latency_us: Vec<Vec<Option<f64>>>,
    /// Headline throughput, Mbit/s.
    pub throughput_mbps: Vec<Vec<Option<f64>>>,
}

/// A pair, or a host, well below the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshFlag {
    /// The pair (for a host: `client` = `server` = the host's rank).
    pub flow: Flow,
    /// `pair` or `host`.
    pub what: String,
    /// Sizes at which it stood out, of the sizes it was measured at.
    pub sizes_flagged: u32,
    /// Sizes it was measured at.
    pub sizes_measured: u32,
    /// Its worst throughput as a fraction of the median of the others at that size.
    pub worst_ratio: f64,
}

/// A mesh run's results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MeshResult {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] of the build that wrote it.
    pub schema_version: u32,
    /// The program that wrote it.
    pub tool: ToolInfo,
    /// RFC 3339 UTC start.
    pub started_at: String,
    /// RFC 3339 UTC end; `None` while running.
    #[serde(default)]
    pub finished_at: Option<String>,
    /// How it ended.
    pub status: RunStatus,
    /// Why it stopped early, when it did.
    #[serde(default)]
    pub message: Option<String>,
    /// The layout.
    pub layout: Layout,
    /// The run every flow made.
    pub spec: RunSpec,
    /// Every rank.
    pub ranks: Vec<RankInfo>,
    /// Rounds planned.
    pub rounds: u32,
    /// Every flow measured so far.
    pub pairs: Vec<PairResult>,
    /// Per size, the matrices of the pairs' figures.
    pub matrices: Vec<SizeMatrix>,
    /// Pairs and hosts well below the others.
    pub flagged: Vec<MeshFlag>,
}

/// The matrices of `pairs` over `n` ranks, one per size measured by any pair.
pub fn matrices(n: u32, pairs: &[PairResult]) -> Vec<SizeMatrix> {
    let mut sizes: Vec<u64> = pairs
        .iter()
        .filter_map(|p| p.result.as_ref())
        .flat_map(|r| r.points.iter().map(|pt| pt.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let empty = || vec![vec![None; n as usize]; n as usize];
    sizes
        .into_iter()
        .map(|size| {
            let mut m = SizeMatrix {
                size,
                latency_us: empty(),
                throughput_mbps: empty(),
            };
            for p in pairs {
                let (c, s) = (p.flow.client as usize, p.flow.server as usize);
                if c >= n as usize || s >= n as usize {
                    continue;
                }
                let Some(pt) = p
                    .result
                    .as_ref()
                    .and_then(|r| r.points.iter().find(|pt| pt.size == size))
                else {
                    continue;
                };
                m.throughput_mbps[c][s] = Some(pt.throughput_mbps.mean);
                let lat = pt
                    .latency
                    .as_ref()
                    .map(|l| l.half_rtt_ns.p50)
                    .or_else(|| pt.crr.as_ref().map(|c| c.connect_ns.p50));
                m.latency_us[c][s] = lat.map(|ns| ns / 1000.0);
            }
            m
        })
        .collect()
}

/// The median of `sorted` with the element at index `k` left out (`None` when nothing is
/// left): a cell compared with the others, each cell in O(1) after one sort.
fn median_without(sorted: &[f64], k: usize) -> Option<f64> {
    let n = sorted.len().checked_sub(1).filter(|n| *n > 0)?;
    let at = |i: usize| if i < k { sorted[i] } else { sorted[i + 1] };
    Some(if n % 2 == 1 {
        at(n / 2)
    } else {
        (at(n / 2 - 1) + at(n / 2)) / 2.0
    })
}

/// How one pair compared with the others over the sizes.
#[derive(Debug, Clone, Copy)]
struct PairTally {
    flagged: u32,
    measured: u32,
    worst: f64,
}

impl PairTally {
    fn stands_out(&self) -> bool {
        self.flagged > 0 && self.flagged * 2 >= self.measured
    }
}

/// The pairs whose throughput is below [`FLAG_RATIO`] × the median of the other pairs at
/// that size on at least half the sizes they were measured at (three pairs at least, so a
/// median of the others exists); then the hosts every one of whose pairs is flagged (with
/// three or more hosts: with two, a slow pair is not a slow host).
pub fn flag(n: u32, matrices: &[SizeMatrix]) -> Vec<MeshFlag> {
    let mut tally: BTreeMap<(u32, u32), PairTally> = BTreeMap::new();
    for m in matrices {
        let cells: Vec<(u32, u32, f64)> = m
            .throughput_mbps
            .iter()
            .enumerate()
            .flat_map(|(c, row)| {
                row.iter()
                    .enumerate()
                    .filter_map(move |(s, x)| x.map(|x| (c as u32, s as u32, x)))
            })
            .collect();
        if cells.len() < 3 {
            continue;
        }
        let mut sorted: Vec<f64> = cells.iter().map(|c| c.2).collect();
        sorted.sort_by(f64::total_cmp);
        for &(c, s, x) in &cells {
            let k = sorted.partition_point(|v| v.total_cmp(&x).is_lt());
            let Some(med) = median_without(&sorted, k).filter(|m| *m > 0.0) else {
                continue;
            };
            let ratio = x / med;
            let t = tally.entry((c, s)).or_insert(PairTally {
                flagged: 0,
                measured: 0,
                worst: f64::INFINITY,
            });
            t.measured += 1;
            t.flagged += u32::from(ratio < FLAG_RATIO);
            t.worst = t.worst.min(ratio);
        }
    }
    let mut out: Vec<MeshFlag> = tally
        .iter()
        .filter(|(_, t)| t.stands_out())
        .map(|(&(client, server), t)| MeshFlag {
            flow: Flow { client, server },
            what: "pair".into(),
            sizes_flagged: t.flagged,
            sizes_measured: t.measured,
            worst_ratio: t.worst,
        })
        .collect();
    if n >= 3 {
        for h in 0..n {
            let mine: Vec<&PairTally> = tally
                .iter()
                .filter(|((c, s), _)| *c == h || *s == h)
                .map(|(_, t)| t)
                .collect();
            if mine.len() >= 2 && mine.iter().all(|t| t.stands_out()) {
                out.push(MeshFlag {
                    flow: Flow {
                        client: h,
                        server: h,
                    },
                    what: "host".into(),
                    sizes_flagged: mine.iter().map(|t| t.flagged).sum(),
                    sizes_measured: mine.iter().map(|t| t.measured).sum(),
                    worst_ratio: mine.iter().map(|t| t.worst).fold(f64::INFINITY, f64::min),
                });
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "mesh_tests.rs"]
mod tests;
