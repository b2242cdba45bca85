//! Claims: a scenario's comparisons of cells' figures, written as data a check can evaluate —
//! `rtt_p50[load=loaded, band=0] > 10 * rtt_p50[load=idle, band=0]`,
//! `throughput[align=aligned, size=64k] / throughput[align=unaligned, size=64k] in 1.0..1.2`,
//! `receiver_mbps[via=gige] within 3% of goodput_limit[via=gige]`. This module parses the
//! text (a pure function: any text gives a claim or an error, never a panic) and resolves
//! its figures to cells, refusing a claim that could never fail.
//!
//! Grammar:
//!
//! ```text
//! claim    := side (">" | "<" | ">=" | "<=") side
//!           | side "in" quantity ".." quantity
//!           | side "within" number "%" "of" side
//! side     := [number ("*" | "×")] operand ["/" operand] [("+" | "-") quantity]
//! operand  := figure ["[" key "=" value ("," key "=" value)* "]"] | quantity
//! quantity := number [unit]        unit: ns us µs ms s · kbit mbit gbit (per second) · %
//! ```
//!
//! A key is a factor's name, `run` (the `[[run]]`) or `size` (one message size of the sweep).

pub use super::metric::Measures;
use super::metric::{self, Metric, MetricUnit};
use serde::{Deserialize, Serialize};

/// A figure of one cell (at one size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureRef {
    /// The figure's name (see [`metric::all`]).
    pub metric: String,
    /// `(factor, level)` pairs picking the cell (`run` picks the `[[run]]`).
    pub selector: Vec<(String, String)>,
    /// The message size, when the selector names one.
    pub size: Option<u64>,
}

/// A figure or a number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Operand {
    /// A cell's figure.
    Figure(FigureRef),
    /// A number, in the base unit of `unit` (ns, Mbit/s, fraction) when it had one.
    Constant {
        /// The value.
        value: f64,
        /// Its unit, when written with one.
        unit: Option<MetricUnit>,
    },
}

/// `times × num ÷ den + plus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The factor in front (1 when none).
    pub times: f64,
    /// The numerator.
    pub num: Operand,
    /// The denominator, when the side is a ratio.
    pub den: Option<Operand>,
    /// A number added (`+ 100us`) or taken away (`- 100us`), in the base unit.
    #[serde(default)]
    pub plus: f64,
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cmp {
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
}

impl Cmp {
    /// Its symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Cmp::Gt => ">",
            Cmp::Ge => "≥",
            Cmp::Lt => "<",
            Cmp::Le => "≤",
        }
    }
}

/// What the left side is tested against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Test {
    /// `left op right`.
    Compare(Cmp, Side),
    /// `left in lo..hi` (both included).
    Range(f64, f64),
    /// `left within p% of right`: left ÷ right in 1 − p … 1 + p (p a fraction).
    Within(f64, Side),
}

/// A parsed claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimExpr {
    /// The side tested.
    pub left: Side,
    /// The test.
    pub test: Test,
}

/// A claim of a scenario: the check, and the words beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// The check as written.
    pub check: String,
    /// The scenario's words for it (prose: no measured number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub says: Option<String>,
    /// The seed's own words, quoted as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// The check, parsed.
    #[serde(skip)]
    pub expr: Option<ClaimExpr>,
}

/// A figure reference resolved to a cell.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The cell.
    pub cell: usize,
    /// The figure.
    pub metric: &'static Metric,
    /// The size (the cell's only size when the claim named none).
    pub size: Option<u64>,
}

/// What a check knows of a cell before it runs: what it measures and its sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct CellFacts {
    /// What its runs measure.
    pub measures: Measures,
    /// The sizes its runs measure (none for a responsiveness test).
    pub sizes: Vec<u64>,
}

/// A parse error: the character column (from 1) and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Column of the problem, from 1.
    pub column: usize,
    /// What is wrong, and the fix.
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at column {}: {}", self.column, self.message)
    }
}

struct P {
    s: Vec<char>,
    i: usize,
}

impl P {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_whitespace()) {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<char> {
        self.ws();
        self.s.get(self.i).copied()
    }
    fn rest_starts(&mut self, t: &str) -> bool {
        self.ws();
        let n = t.chars().count();
        self.s.len() >= self.i + n && self.s[self.i..self.i + n].iter().copied().eq(t.chars())
    }
    fn eat(&mut self, t: &str) -> bool {
        if self.rest_starts(t) {
            self.i += t.chars().count();
            true
        } else {
            false
        }
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            column: self.i + 1,
            message: msg.into(),
        })
    }
    fn word(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
        {
            self.i += 1;
        }
        self.s[start..self.i].iter().collect()
    }
    fn number(&mut self) -> Option<f64> {
        self.ws();
        let start = self.i;
        let digits = |p: &mut Self| {
            let s = p.i;
            while p.s.get(p.i).is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            p.i > s
        };
        let mut any = digits(self);
        if self.s.get(self.i) == Some(&'.')
            && self.s.get(self.i + 1).is_some_and(|c| c.is_ascii_digit())
        {
            self.i += 1;
            any |= digits(self);
        }
        if !any {
            self.i = start;
            return None;
        }
        if matches!(self.s.get(self.i), Some('e' | 'E'))
            && self
                .s
                .get(self.i + 1)
                .is_some_and(|c| c.is_ascii_digit() || *c == '-' || *c == '+')
        {
            let save = self.i;
            self.i += 2;
            if !digits(self) {
                self.i = save;
            }
        }
        let text: String = self.s[start..self.i].iter().collect();
        text.parse().ok().filter(|v: &f64| v.is_finite())
    }
    /// A unit right after a number: (factor to the base unit, unit).
    fn unit(&mut self) -> Option<(f64, MetricUnit)> {
        let save = self.i;
        self.ws();
        if self.s.get(self.i) == Some(&'%') {
            self.i += 1;
            return Some((0.01, MetricUnit::Fraction));
        }
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_alphabetic() || *c == '/')
        {
            self.i += 1;
        }
        let w: String = self.s[start..self.i]
            .iter()
            .collect::<String>()
            .to_lowercase();
        let w = w.strip_suffix("/s").unwrap_or(&w).to_string();
        let u = match w.as_str() {
            "ns" => (1.0, MetricUnit::Nanos),
            "us" | "µs" | "μs" => (1e3, MetricUnit::Nanos),
            "ms" => (1e6, MetricUnit::Nanos),
            "s" => (1e9, MetricUnit::Nanos),
            "bit" => (1e-6, MetricUnit::Mbps),
            "kbit" => (1e-3, MetricUnit::Mbps),
            "mbit" => (1.0, MetricUnit::Mbps),
            "gbit" => (1e3, MetricUnit::Mbps),
            _ => {
                self.i = save;
                return None;
            }
        };
        Some(u)
    }
    fn quantity(&mut self) -> Option<(f64, Option<MetricUnit>)> {
        let v = self.number()?;
        Some(match self.unit() {
            Some((f, u)) => (v * f, Some(u)),
            None => (v, None),
        })
    }
    fn value(&mut self) -> Result<String, ParseError> {
        self.ws();
        if self.s.get(self.i) == Some(&'"') {
            self.i += 1;
            let start = self.i;
            while self.s.get(self.i).is_some_and(|c| *c != '"') {
                self.i += 1;
            }
            if self.s.get(self.i) != Some(&'"') {
                return self.err("a quoted level has no closing '\"'");
            }
            let v: String = self.s[start..self.i].iter().collect();
            self.i += 1;
            return Ok(v);
        }
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| !matches!(c, ',' | ']' | '[' | '=' | '"'))
        {
            self.i += 1;
        }
        let v: String = self.s[start..self.i]
            .iter()
            .collect::<String>()
            .trim()
            .to_string();
        if v.is_empty() {
            return self.err("expected a level after '=' (quote it if it holds ',' or ']')");
        }
        Ok(v)
    }
    fn operand(&mut self) -> Result<Operand, ParseError> {
        if let Some((value, unit)) = self.quantity() {
            return Ok(Operand::Constant { value, unit });
        }
        let name = self.word();
        if name.is_empty() {
            return self.err(format!(
                "expected a figure (one of {}) or a number",
                metric::names()
            ));
        }
        let mut selector = Vec::new();
        let mut size = None;
        if self.eat("[") {
            loop {
                let key = self.word();
                if key.is_empty() {
                    return self.err("expected factor=level inside [...]");
                }
                if !self.eat("=") {
                    return self.err(format!("expected '=' after \"{key}\""));
                }
                let at = self.i;
                let v = self.value()?;
                if key == "size" {
                    match crate::sizes::parse_sizes(&v) {
                        Ok(s) if s.len() == 1 => size = Some(s[0]),
                        _ => {
                            self.i = at;
                            return self.err(format!(
                                "size={v} is not one message size: write e.g. size=64k"
                            ));
                        }
                    }
                } else {
                    if selector.iter().any(|(k, _): &(String, String)| *k == key) {
                        return self.err(format!("\"{key}\" is given twice"));
                    }
                    selector.push((key, v));
                }
                if self.eat(",") {
                    continue;
                }
                if self.eat("]") {
                    break;
                }
                return self.err("expected ',' or ']'");
            }
        }
        Ok(Operand::Figure(FigureRef {
            metric: name,
            selector,
            size,
        }))
    }
    fn side(&mut self) -> Result<Side, ParseError> {
        let save = self.i;
        let mut times = 1.0;
        if let Some(v) = self.number() {
            if self.eat("*") || self.eat("×") {
                times = v;
            } else {
                self.i = save;
            }
        }
        let num = self.operand()?;
        let den = if self.eat("/") || self.eat("÷") {
            Some(self.operand()?)
        } else {
            None
        };
        let sign = if self.eat("+") {
            1.0
        } else if self.eat("-") || self.eat("−") {
            -1.0
        } else {
            return Ok(Side {
                times,
                num,
                den,
                plus: 0.0,
            });
        };
        let Some((v, _)) = self.quantity() else {
            return self.err("expected a number after '+' or '-', e.g. + 100us");
        };
        Ok(Side {
            times,
            num,
            den,
            plus: sign * v,
        })
    }
}

/// Parses a claim's `check` text.
pub fn parse(text: &str) -> Result<ClaimExpr, ParseError> {
    let mut p = P {
        s: text.chars().collect(),
        i: 0,
    };
    let left = p.side()?;
    let test = if p.eat(">=") || p.eat("≥") {
        Test::Compare(Cmp::Ge, p.side()?)
    } else if p.eat("<=") || p.eat("≤") {
        Test::Compare(Cmp::Le, p.side()?)
    } else if p.eat(">") {
        Test::Compare(Cmp::Gt, p.side()?)
    } else if p.eat("<") {
        Test::Compare(Cmp::Lt, p.side()?)
    } else {
        let w = p.word();
        match w.as_str() {
            "in" => {
                let Some((lo, _)) = p.quantity() else {
                    return p.err("expected a range after 'in', e.g. in 1.0..1.2");
                };
                if !p.eat("..") {
                    return p.err("expected '..' between the range's ends, e.g. 1.0..1.2");
                }
                let Some((hi, _)) = p.quantity() else {
                    return p.err("expected the range's upper end");
                };
                if lo >= hi {
                    return p.err(format!(
                        "the range {lo}..{hi} is empty: put the lower end first"
                    ));
                }
                Test::Range(lo, hi)
            }
            "within" => {
                let Some(pct) = p.number() else {
                    return p.err("expected a percentage after 'within', e.g. within 3% of …");
                };
                if !p.eat("%") {
                    return p.err("expected '%' after the percentage");
                }
                if !(pct > 0.0 && pct < 100.0) {
                    return p.err("the percentage must be above 0 and below 100");
                }
                if p.word() != "of" {
                    return p.err("expected 'of' after the percentage");
                }
                Test::Within(pct / 100.0, p.side()?)
            }
            _ => {
                return p
                    .err("expected a comparison: >, <, >=, <=, 'in LO..HI' or 'within P% of …'")
            }
        }
    };
    if p.peek().is_some() {
        return p.err("unexpected text after the claim");
    }
    Ok(ClaimExpr { left, test })
}

impl Side {
    /// The figure references of this side.
    pub fn figures(&self) -> impl Iterator<Item = &FigureRef> {
        [Some(&self.num), self.den.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|o| match o {
                Operand::Figure(f) => Some(f),
                Operand::Constant { .. } => None,
            })
    }
}

impl ClaimExpr {
    /// Every figure reference, left to right.
    pub fn figures(&self) -> Vec<&FigureRef> {
        let mut v: Vec<&FigureRef> = self.left.figures().collect();
        match &self.test {
            Test::Compare(_, s) | Test::Within(_, s) => v.extend(s.figures()),
            Test::Range(..) => {}
        }
        v
    }
}

#[cfg(test)]
#[path = "claim_tests.rs"]
mod tests;

pub use super::resolve::{resolve, show};
