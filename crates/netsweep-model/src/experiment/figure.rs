//! What an experiment's figure shows: one figure (`y`) against a factor or the message size
//! (`x`), one series per level of another factor, small multiples (`panels`) over a third —
//! and the figures a scenario gets when it asks for none.

use super::design::{quoted, Design};
use super::metric::{self, Measures};
use crate::spec::Pattern;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `x = "size"`: the message size on the horizontal axis.
pub const SIZE: &str = "size";

/// One figure of a page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureSpec {
    /// File stem (`figures/<id>.svg`).
    pub id: String,
    /// Title; default: "<figure label> against <x label>".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The figure drawn (a name of [`metric::all`]).
    pub y: String,
    /// A second figure drawn dashed beside `y`, in the same series' colours (Figure 3.8's
    /// sender rate beside the receiver's); same unit as `y`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashed: Option<String>,
    /// A factor's name, [`SIZE`], or another figure's name: then `y` is drawn against it, a
    /// point per message size (NetPIPE's signature graph: `y = "throughput"`,
    /// `x = "latency_p50"`).
    pub x: String,
    /// A factor whose levels are the series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    /// A factor whose levels are the panels (small multiples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panels: Option<String>,
    /// The message size read when `x` is a factor and the cells measure several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Logarithmic x axis (default: for sizes, and for numeric levels spanning over 20×).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_x: Option<bool>,
    /// Logarithmic y axis (default: no).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_y: Option<bool>,
    /// Only the cells of this `[[run]]` (default: every cell that measures `y`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Only the cells at these levels: factor name → level names (`only = { path =
    /// ["routed", "encapsulated"] }`), so that a value axis fitted to the data shows what the
    /// figure is for (default: every level).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub only: BTreeMap<String, Vec<String>>,
    /// A linear value axis starts at zero (default: yes); false fits it to the data, so a
    /// difference of a few per cent fills the figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y_zero: Option<bool>,
}

impl FigureSpec {
    /// The figure `x` names, when it names one and no factor: `y` is drawn against it.
    pub fn x_figure(&self, design: &Design) -> Option<&'static metric::Metric> {
        design
            .factor(&self.x)
            .is_none()
            .then(|| metric::metric(&self.x))
            .flatten()
    }

    /// Checks the names against the design and the catalogue; the error says the fix.
    pub fn check(&self, design: &Design) -> Result<(), String> {
        if metric::metric(&self.y).is_none() {
            return Err(format!(
                "y: no figure called \"{}\": the figures are {}",
                self.y,
                metric::names()
            ));
        }
        if let Some(d) = &self.dashed {
            let (Some(dm), Some(ym)) = (metric::metric(d), metric::metric(&self.y)) else {
                return Err(format!(
                    "dashed: no figure called \"{d}\": the figures are {}",
                    metric::names()
                ));
            };
            if dm.unit != ym.unit {
                return Err(format!(
                    "dashed: \"{d}\" is not in the unit of \"{}\": pick a figure of the same unit",
                    self.y
                ));
            }
        }
        let factor = |field: &str, name: &str| -> Result<usize, String> {
            design.factor(name).ok_or_else(|| {
                format!(
                    "{field}: no factor called \"{name}\": the factors are {}{}",
                    quoted(design.factors.iter().map(|f| f.name.as_str())),
                    if field == "x" {
                        " (or \"size\", or a figure's name)"
                    } else {
                        ""
                    }
                )
            })
        };
        if let Some(run) = &self.run {
            if !design.cells.iter().any(|c| &c.run == run) {
                let mut runs: Vec<&str> = design.cells.iter().map(|c| c.run.as_str()).collect();
                runs.dedup();
                return Err(format!(
                    "run: no [[run]] called \"{run}\": the runs are {}",
                    quoted(runs.into_iter())
                ));
            }
        }
        for (name, levels) in &self.only {
            let f = &design.factors[factor("only", name)?];
            if levels.is_empty() {
                return Err(format!(
                    "only: no level of \"{name}\" given: name at least one of {}",
                    quoted(f.levels.iter().map(|l| l.name.as_str()))
                ));
            }
            if let Some(l) = levels
                .iter()
                .find(|l| !f.levels.iter().any(|x| &x.name == *l))
            {
                return Err(format!(
                    "only: \"{name}\" has no level \"{l}\": its levels are {}",
                    quoted(f.levels.iter().map(|l| l.name.as_str()))
                ));
            }
        }
        let mut used = Vec::new();
        if self.x != SIZE && self.x_figure(design).is_none() {
            used.push(factor("x", &self.x)?);
        }
        for (field, f) in [("series", &self.series), ("panels", &self.panels)] {
            if let Some(name) = f {
                let i = factor(field, name)?;
                if used.contains(&i) {
                    return Err(format!(
                        "{field}: \"{name}\" is already on another axis of this figure: pick another factor"
                    ));
                }
                used.push(i);
            }
        }
        Ok(())
    }
}

/// The figure a pattern is read by: the round trip for pingpong, connection setup for crr,
/// the receiver's goodput for stream, the throughput otherwise.
pub fn headline(what: Measures) -> &'static str {
    match what {
        Measures::Pattern(Pattern::Pingpong) => "rtt_p50",
        Measures::Pattern(Pattern::Crr) => "connect_p50",
        Measures::Pattern(Pattern::Stream) => "receiver_mbps",
        Measures::Pattern(_) => "throughput",
        Measures::Rpm => "rpm_download",
    }
}

/// The figures of a scenario that asks for none: the headline figure against the first
/// factor (series: the second, panels: the third), and against size (series: the first
/// factor) when the cells measure several sizes (a responsiveness test has none).
pub fn defaults(design: &Design, what: Measures, several_sizes: bool) -> Vec<FigureSpec> {
    let y = headline(what).to_string();
    let names: Vec<&str> = design.factors.iter().map(|f| f.name.as_str()).collect();
    let mut out = Vec::new();
    if let Some(first) = names.first() {
        out.push(FigureSpec {
            id: format!("{y}-by-{first}"),
            title: None,
            y: y.clone(),
            dashed: None,
            x: first.to_string(),
            series: names.get(1).map(|s| s.to_string()),
            panels: names.get(2).map(|s| s.to_string()),
            size: None,
            log_x: None,
            log_y: None,
            run: None,
            only: BTreeMap::new(),
            y_zero: None,
        });
    }
    if (several_sizes || names.is_empty()) && what != Measures::Rpm {
        out.push(FigureSpec {
            id: format!("{y}-by-size"),
            title: None,
            y,
            dashed: None,
            x: SIZE.into(),
            series: names.first().map(|s| s.to_string()),
            panels: names.get(1).map(|s| s.to_string()),
            size: None,
            log_x: None,
            log_y: None,
            run: None,
            only: BTreeMap::new(),
            y_zero: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::design::{Factor, FactorKind};

    #[test]
    fn a_responsiveness_tests_default_figure_is_its_rpm_against_a_factor_never_size() {
        let factor = Factor {
            name: "aqm".into(),
            label: "queue management".into(),
            kind: FactorKind::Args,
            levels: Vec::new(),
        };
        let one = Design {
            factors: vec![factor],
            ..Design::default()
        };
        let rpm = defaults(&one, Measures::Rpm, false);
        assert_eq!(rpm.len(), 1);
        assert_eq!(
            (rpm[0].y.as_str(), rpm[0].x.as_str()),
            ("rpm_download", "aqm")
        );
        // No factor: a pattern gets its figure against size, a responsiveness test nothing.
        let none = Design::default();
        assert!(defaults(&none, Measures::Rpm, false).is_empty());
        let pp = defaults(&none, Measures::Pattern(Pattern::Pingpong), false);
        assert_eq!((pp[0].y.as_str(), pp[0].x.as_str()), ("rtt_p50", "size"));
    }
}
