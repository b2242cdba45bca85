//! The design of an experiment: its factors with their levels, the cells (combinations of
//! levels) a scenario's runs expand into, and the order the repetitions run in — every cell
//! once per round, rounds one after another (ABCABC…), or each round shuffled with a seed,
//! so that drift on the host lands on every cell alike.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an experiment varies, with its levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Factor {
    /// The name claims and figures use (`band`, `load`): letters, digits, '-', '_'.
    pub name: String,
    /// The readable name (legend titles, axis titles, the page's factor table).
    pub label: String,
    /// What a level changes.
    #[serde(flatten)]
    pub kind: FactorKind,
    /// The levels, in the order the scenario gives them (the order on a figure's axis).
    pub levels: Vec<Level>,
}

/// What a factor's level changes in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum FactorKind {
    /// A `netsweep run` argument (`--priority`, `--sndbuf`, `--cc`, `--background`, `-t`…):
    /// the level's value follows the flag; a level without a value leaves the flag out.
    Arg {
        /// The flag.
        flag: String,
    },
    /// Arguments given per level (`args = [...]`): a level may change several at once.
    Args,
    /// How many `netsweep run` clients run at once against the one server.
    Clients,
    /// Which link or tunnel of the lab the client targets (the path).
    Via,
    /// A property of the lab: `links.<link>.<field>` (rate, mtu, classes, …); each level
    /// builds the lab with that value.
    Lab {
        /// `links.<link>.<field>`.
        path: String,
    },
}

/// One level of a factor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// Short name: claims select cells by it (`band=1`), results files carry it.
    pub name: String,
    /// Readable label: legends and tables show it.
    pub label: String,
    /// The `netsweep run` arguments this level adds (Arg and Args factors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The value (client count, link or tunnel name, lab property value), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// The level's position on a numeric axis, when it has one (`64k` → 65536, `100mbit` →
    /// 1e8); a factor whose every level has one is numeric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
}

impl Factor {
    /// True when every level has a numeric position: figures draw it as a line.
    pub fn is_numeric(&self) -> bool {
        !self.levels.is_empty() && self.levels.iter().all(|l| l.x.is_some())
    }

    /// The level a selector names: by name, label or value text.
    pub fn level(&self, key: &str) -> Option<usize> {
        let key = key.trim();
        self.levels
            .iter()
            .position(|l| l.name == key)
            .or_else(|| self.levels.iter().position(|l| l.label == key))
            .or_else(|| {
                self.levels.iter().position(|l| {
                    l.value.as_ref().is_some_and(|v| match v {
                        serde_json::Value::String(s) => s == key,
                        other => {
                            *other == serde_json::Value::String(key.into())
                                || other.to_string().as_str() == key
                        }
                    })
                })
            })
    }

    /// The level names, quoted, for messages.
    pub fn level_list(&self) -> String {
        quoted(self.levels.iter().map(|l| l.name.as_str()))
    }
}

/// `"a", "b", "c"`.
pub fn quoted<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One combination of levels of one run of the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Unique name; the stem of its results files.
    pub name: String,
    /// The `[[run]]` it comes from.
    pub run: String,
    /// (factor index, level index) for every factor the run varies, in factor order.
    pub at: Vec<(usize, usize)>,
    /// Factor name → level name, for readers of `index.json`.
    pub levels: BTreeMap<String, String>,
}

impl Cell {
    /// The level index of factor `f` in this cell, if the cell's run varies it.
    pub fn level_of(&self, f: usize) -> Option<usize> {
        self.at.iter().find(|(i, _)| *i == f).map(|(_, l)| *l)
    }
}

/// The order of a scenario's runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Order {
    /// Every cell once per round, in cell order; round after round (ABCABC…).
    #[default]
    Interleaved,
    /// Every cell once per round, each round shuffled by a generator seeded with `seed`.
    Random {
        /// The seed: the same seed gives the same order.
        seed: u64,
    },
}

/// The factors, the cells and how often and in which order they run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Design {
    /// Every factor of the scenario.
    pub factors: Vec<Factor>,
    /// Every cell, in grid order (runs in file order; first factor slowest).
    pub cells: Vec<Cell>,
    /// Repetitions of every cell.
    pub repeat: u32,
    /// The order the repetitions run in.
    pub order: Order,
}

impl Design {
    /// The factor called `name`.
    pub fn factor(&self, name: &str) -> Option<usize> {
        self.factors.iter().position(|f| f.name == name)
    }

    /// The cells whose levels match every `(factor, level)` of `selector`; `run` selects by
    /// the `[[run]]` a cell comes from. The error says what is unknown, and how to fix it.
    pub fn select(&self, selector: &[(String, String)]) -> Result<Vec<usize>, String> {
        let mut want: Vec<(Option<usize>, Option<usize>, &str)> = Vec::new();
        for (f, l) in selector {
            if f == "run" {
                if !self.cells.iter().any(|c| &c.run == l) {
                    let mut runs: Vec<&str> = self.cells.iter().map(|c| c.run.as_str()).collect();
                    runs.dedup();
                    return Err(format!(
                        "no run called \"{l}\": the runs are {}",
                        quoted(runs)
                    ));
                }
                want.push((None, None, l));
                continue;
            }
            let Some(fi) = self.factor(f) else {
                return Err(format!(
                    "no factor called \"{f}\": the factors are {}",
                    if self.factors.is_empty() {
                        "none (add a [[factor]])".to_string()
                    } else {
                        quoted(self.factors.iter().map(|f| f.name.as_str()))
                    }
                ));
            };
            let Some(li) = self.factors[fi].level(l) else {
                return Err(format!(
                    "factor \"{f}\" has no level \"{l}\": its levels are {}",
                    self.factors[fi].level_list()
                ));
            };
            want.push((Some(fi), Some(li), l));
        }
        Ok(self
            .cells
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                want.iter().all(|(f, l, run)| match (f, l) {
                    (Some(f), Some(l)) => c.level_of(*f) == Some(*l),
                    _ => c.run == *run,
                })
            })
            .map(|(i, _)| i)
            .collect())
    }

    /// The readable description of a cell: its levels' labels, `factor label: level label`.
    pub fn describe(&self, cell: usize) -> String {
        let c = &self.cells[cell];
        let mut parts: Vec<String> =
            c.at.iter()
                .map(|&(f, l)| self.factors[f].levels[l].label.clone())
                .collect();
        if parts.is_empty() || self.cells.iter().any(|o| o.run != c.run) {
            parts.insert(0, c.run.clone());
        }
        parts.join(", ")
    }

    /// Runs in the order they are made: (cell, repetition from 1).
    pub fn schedule(&self) -> Vec<(usize, u32)> {
        schedule(self.cells.len(), self.repeat, self.order)
    }
}

/// Every combination of `counts[i]` levels, first factor slowest: [[0,0],[0,1],[1,0],[1,1]].
pub fn full_grid(counts: &[usize]) -> Vec<Vec<usize>> {
    if counts.contains(&0) {
        return Vec::new();
    }
    let mut out = vec![vec![0; counts.len()]];
    loop {
        let mut next = out[out.len() - 1].clone();
        let mut i = counts.len();
        loop {
            if i == 0 {
                return out;
            }
            i -= 1;
            next[i] += 1;
            if next[i] < counts[i] {
                break;
            }
            next[i] = 0;
        }
        out.push(next);
    }
}

/// The runs of `cells` cells repeated `repeat` times: round r holds every cell once (in cell
/// order, or shuffled for [`Order::Random`]), rounds in turn. (cell, repetition from 1).
pub fn schedule(cells: usize, repeat: u32, order: Order) -> Vec<(usize, u32)> {
    let mut out = Vec::with_capacity(cells * repeat as usize);
    let mut rng = match order {
        Order::Random { seed } => Some(SplitMix64(seed)),
        Order::Interleaved => None,
    };
    for rep in 1..=repeat {
        let mut round: Vec<usize> = (0..cells).collect();
        if let Some(r) = rng.as_mut() {
            // Fisher–Yates.
            for i in (1..round.len()).rev() {
                let j = (r.next() % (i as u64 + 1)) as usize;
                round.swap(i, j);
            }
        }
        out.extend(round.into_iter().map(|c| (c, rep)));
    }
    out
}

/// A small, well-mixed generator (Steele, Lea and Flood's SplitMix64): the same seed gives
/// the same order on every machine.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_grid_puts_the_first_factor_slowest() {
        assert_eq!(
            full_grid(&[2, 3]),
            vec![
                vec![0, 0],
                vec![0, 1],
                vec![0, 2],
                vec![1, 0],
                vec![1, 1],
                vec![1, 2]
            ]
        );
        assert_eq!(full_grid(&[]), vec![Vec::<usize>::new()]);
        assert!(full_grid(&[2, 0]).is_empty());
    }

    #[test]
    fn interleaving_runs_every_cell_once_per_round() {
        let s = schedule(3, 2, Order::Interleaved);
        assert_eq!(s, vec![(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]);
    }

    #[test]
    fn random_order_shuffles_each_round_and_is_reproducible() {
        let a = schedule(5, 4, Order::Random { seed: 7 });
        assert_eq!(a, schedule(5, 4, Order::Random { seed: 7 }));
        assert_ne!(a, schedule(5, 4, Order::Random { seed: 8 }));
        assert_ne!(a, schedule(5, 4, Order::Interleaved));
        for (r, round) in a.chunks(5).enumerate() {
            let mut cells: Vec<usize> = round.iter().map(|(c, _)| *c).collect();
            cells.sort_unstable();
            assert_eq!(cells, vec![0, 1, 2, 3, 4], "round {r}: {round:?}");
            assert!(round.iter().all(|(_, rep)| *rep == r as u32 + 1));
        }
    }
}
