//! Typed command-line values: the closed sets (transport, pattern, api, format) as clap
//! `ValueEnum`s, so `--help` lists them and a bad one is a usage error naming the choices,
//! and the `C,S` per-side knob values as clap value parsers.

use crate::cli::parse;
use clap::builder::PossibleValue;
use clap::ValueEnum;
use netsweep_model::background::BackgroundSpec;
use netsweep_model::mesh::Layout;
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_report::Format;

/// A clap `ValueEnum` newtype over a core enum: every variant listed once with its name
/// (the enum's `name()`) and the hidden aliases its core `parse` also accepts.
macro_rules! choice {
    ($(#[$doc:meta])* $wrap:ident($inner:ty) { $($v:path => [$($alias:literal),*]),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $wrap(pub $inner);

        impl ValueEnum for $wrap {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($wrap($v)),+]
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                let aliases: &[&'static str] = match self.0 {
                    $($v => &[$($alias),*]),+
                };
                Some(PossibleValue::new(self.0.name()).aliases(aliases.iter().copied()))
            }
        }
    };
}

/// A clap `ValueEnum` newtype over a model enum that lists itself (`ALL`) and names itself
/// (`name()`, `aliases()`): a new variant needs no line here.
macro_rules! named {
    ($(#[$doc:meta])* $wrap:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct $wrap(pub $inner);

        impl ValueEnum for $wrap {
            fn value_variants<'a>() -> &'a [Self] {
                const N: usize = <$inner>::ALL.len();
                const V: [$wrap; N] = {
                    let mut v = [$wrap(<$inner>::ALL[0]); N];
                    let mut i = 1;
                    while i < N {
                        v[i] = $wrap(<$inner>::ALL[i]);
                        i += 1;
                    }
                    v
                };
                &V
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                let aliases = self.0.aliases().iter().copied();
                Some(PossibleValue::new(self.0.name()).aliases(aliases))
            }
        }
    };
}

named! {
    /// `--transport`.
    TransportArg(Transport)
}

named! {
    /// `--pattern`.
    PatternArg(Pattern)
}

named! {
    /// `--api`.
    ApiArg(Api)
}

choice! {
    /// `--layout` of `mesh`.
    LayoutArg(Layout) {
        Layout::Pairs => [],
        Layout::Ring => [],
        Layout::Incast => [],
        Layout::Bisection => [],
    }
}

choice! {
    /// `--format` of `run` and `report`.
    FormatArg(Format) {
        Format::Text => [],
        Format::Json => [],
        Format::Jsonl => [],
        Format::Csv => [],
        Format::Npout => [],
        Format::Openmetrics => [],
    }
}

/// `--format` of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    Text,
    Json,
}

/// A knob set apart per side: `X` is both ends, `C,S` client and server, `C,` or `,S` one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerSide<T> {
    pub client: Option<T>,
    pub server: Option<T>,
}

impl<T: Copy> PerSide<T> {
    /// The pair (client, server), as the knobs take it.
    pub fn pair(v: Option<Self>) -> (Option<T>, Option<T>) {
        v.map_or((None, None), |p| (p.client, p.server))
    }
}

/// Splits a per-side value and parses each side with `one`.
fn per_side<T: Copy>(
    v: &str,
    one: impl Fn(&str) -> Result<T, String>,
) -> Result<PerSide<T>, String> {
    let side = |x: &str| -> Result<Option<T>, String> {
        let x = x.trim();
        if x.is_empty() {
            Ok(None)
        } else {
            one(x).map(Some)
        }
    };
    match v.split_once(',') {
        None => {
            let x = side(v)?;
            Ok(PerSide {
                client: x,
                server: x,
            })
        }
        Some((c, s)) if !s.contains(',') => Ok(PerSide {
            client: side(c)?,
            server: side(s)?,
        }),
        _ => Err(format!(
            "'{v}' has too many values: give one value for both ends or CLIENT,SERVER"
        )),
    }
}

/// A decimal or `0x` hexadecimal number that fits `T`.
fn number<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    let parsed = if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16)
            .ok()
            .and_then(|v| v.to_string().parse().ok())
    } else {
        s.parse().ok()
    };
    parsed.ok_or_else(|| format!("'{s}' is not a number in range"))
}

/// `--sndbuf`, `--rcvbuf`: a byte size per side.
pub fn sizes(v: &str) -> Result<PerSide<u64>, String> {
    per_side(v, parse::size)
}

/// `--offset`: bytes from a page boundary per side, below the page size.
pub fn offsets(v: &str) -> Result<PerSide<u64>, String> {
    per_side(v, |x| {
        let o = number::<u64>(x)?;
        if o >= 4096 {
            return Err(format!("offset {o} must be below the page size (4096)"));
        }
        Ok(o)
    })
}

/// `--tos`: a TOS byte per side.
pub fn tos(v: &str) -> Result<PerSide<u8>, String> {
    per_side(v, number::<u8>)
}

/// `--dscp`: a DSCP code point (0..63) per side, returned as the TOS byte (DSCP << 2).
pub fn dscp(v: &str) -> Result<PerSide<u8>, String> {
    per_side(v, |x| {
        let d = number::<u8>(x)?;
        if d > 63 {
            return Err(format!("DSCP {d} is out of range: DSCP is 0..63"));
        }
        Ok(d << 2)
    })
}

/// `--priority`, `--busy-poll`: a 32-bit number per side.
pub fn u32s(v: &str) -> Result<PerSide<u32>, String> {
    per_side(v, number::<u32>)
}

/// `--pacing-rate`: a rate per side, in tc's units, as bits per second.
pub fn rates(v: &str) -> Result<PerSide<u64>, String> {
    per_side(v, crate::cli::parse_rate)
}

/// `--background`: one background flow (`stream[,KEY=VALUE]…`).
pub fn background(v: &str) -> Result<BackgroundSpec, String> {
    BackgroundSpec::parse(v)
}

/// `--cpu`: a CPU per side; `free` (for both ends or one) leaves a side to the scheduler.
pub fn cpus(v: &str) -> Result<PerSide<u32>, String> {
    per_side(&v.replace("free", ""), number::<u32>)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every core variant is offered once, and every name and alias the CLI accepts maps
    /// to the variant the core's own parser gives it.
    #[test]
    fn choices_match_the_core_enums() {
        fn check<W: ValueEnum, T: PartialEq + std::fmt::Debug + Copy>(
            all: &[T],
            inner: impl Fn(&W) -> T,
            parse: impl Fn(&str) -> Option<T>,
        ) {
            let offered: Vec<T> = W::value_variants().iter().map(&inner).collect();
            assert_eq!(offered, all);
            for w in W::value_variants() {
                let pv = w.to_possible_value().unwrap();
                for name in pv.get_name_and_aliases() {
                    assert_eq!(parse(name), Some(inner(w)), "{name}");
                    assert_eq!(W::from_str(name, false).map(|x| inner(&x)), Ok(inner(w)));
                }
            }
        }
        check(&Transport::ALL, |w: &TransportArg| w.0, Transport::parse);
        check(&Pattern::ALL, |w: &PatternArg| w.0, Pattern::parse);
        check(&Api::ALL, |w: &ApiArg| w.0, Api::parse);
        check(&Format::ALL, |w: &FormatArg| w.0, Format::parse);
        assert_eq!(Transport::parse("unix"), Some(Transport::UnixStream));
    }

    #[test]
    fn per_side_values() {
        fn both<T>(client: Option<T>, server: Option<T>) -> PerSide<T> {
            PerSide { client, server }
        }
        assert_eq!(sizes("64k"), Ok(both(Some(65536), Some(65536))));
        assert_eq!(sizes("4k,"), Ok(both(Some(4096), None)));
        assert_eq!(u32s(",7"), Ok(both(None, Some(7))));
        assert_eq!(tos("0x10,0x20"), Ok(both(Some(0x10), Some(0x20))));
        assert_eq!(dscp("46"), Ok(both(Some(46 << 2), Some(46 << 2))));
        assert!(dscp("64").unwrap_err().contains("0..63"));
        assert!(offsets("4096").unwrap_err().contains("page size"));
        assert_eq!(cpus("free,1"), Ok(both(None, Some(1))));
        assert_eq!(cpus("free"), Ok(both(None, None)));
        assert!(u32s("1,2,3").unwrap_err().contains("CLIENT,SERVER"));
        assert!(tos("256").unwrap_err().contains("in range"));
    }
}
