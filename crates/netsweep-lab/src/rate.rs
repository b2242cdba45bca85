//! Link rates: tc's unit words ("100mbit", "1gbit", "12mbps") parsed into bits per second.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A rate in bits per second (SI: 1 mbit = 10^6 bit/s, as tc counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rate {
    /// Bits per second.
    pub bits_per_sec: u64,
}

/// The unit words tc understands: bits per second (`bit`) and bytes per second (`bps`).
const UNITS: &[(&str, f64)] = &[
    ("tbit", 1e12),
    ("gbit", 1e9),
    ("mbit", 1e6),
    ("kbit", 1e3),
    ("bit", 1.0),
    ("tbps", 8e12),
    ("gbps", 8e9),
    ("mbps", 8e6),
    ("kbps", 8e3),
    ("bps", 8.0),
];

impl Rate {
    /// A rate of `bits_per_sec`.
    pub fn from_bits(bits_per_sec: u64) -> Self {
        Rate { bits_per_sec }
    }

    /// Bytes per second (rounded down).
    pub fn bytes_per_sec(self) -> u64 {
        self.bits_per_sec / 8
    }

    /// Parses "100mbit", "1.5gbit", "12mbps" (bytes/s, as tc reads it). Case is ignored.
    /// The error message names the accepted units.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let t = text.trim().to_ascii_lowercase();
        let t = t.strip_suffix("/s").unwrap_or(&t);
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let unit = unit.trim();
        if number.is_empty() {
            return Err(format!(
                "\"{text}\" is not a rate: write a number and a unit, e.g. \"100mbit\""
            ));
        }
        if unit.is_empty() && number.parse::<f64>() == Ok(0.0) {
            // "0mbit" would be refused as out of range the next time: say so at once.
            return Err(format!(
                "\"{text}\": a rate of 0 carries nothing: give one of at least 8bit, e.g. \"100mbit\""
            ));
        }
        if unit.is_empty() {
            return Err(format!(
                "\"{text}\" has no unit: write e.g. \"{number}mbit\" (bits/s) or \"{number}mbps\" (bytes/s)"
            ));
        }
        let Some(&(_, factor)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(format!(
                "\"{text}\": unknown unit \"{unit}\"; use bit, kbit, mbit, gbit, tbit (bits/s) or bps, kbps, mbps, gbps, tbps (bytes/s)"
            ));
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("\"{text}\": \"{number}\" is not a number"))?;
        let bits = value * factor;
        if !(8.0..=1.0e15).contains(&bits) {
            return Err(format!(
                "\"{text}\" is out of range: use between 8bit and 1000tbit"
            ));
        }
        Ok(Rate {
            bits_per_sec: bits.round() as u64,
        })
    }

    /// The rate as tc should be told it, exactly: "100000000bit".
    pub fn tc_arg(self) -> String {
        format!("{}bit", self.bits_per_sec)
    }
}

impl fmt::Display for Rate {
    /// The shortest exact form: "100mbit", "1gbit", "1500kbit", "12345bit".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_sec;
        for (unit, factor) in [("tbit", 1e12), ("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)] {
            let factor = factor as u64;
            if b >= factor && b.is_multiple_of(factor) {
                return write!(f, "{}{unit}", b / factor);
            }
        }
        write!(f, "{b}bit")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tc_units() {
        assert_eq!(Rate::parse("100mbit").unwrap().bits_per_sec, 100_000_000);
        assert_eq!(Rate::parse("1Gbit").unwrap().bits_per_sec, 1_000_000_000);
        assert_eq!(Rate::parse("1.5mbit").unwrap().bits_per_sec, 1_500_000);
        assert_eq!(Rate::parse("12mbps").unwrap().bits_per_sec, 96_000_000);
        assert_eq!(Rate::parse("64kbit").unwrap().bits_per_sec, 64_000);
        assert_eq!(Rate::parse("10 mbit/s").unwrap().bits_per_sec, 10_000_000);
    }

    #[test]
    fn rejects_bad_rates_with_a_fix() {
        assert!(Rate::parse("100").unwrap_err().contains("no unit"));
        assert!(Rate::parse("fast").unwrap_err().contains("not a rate"));
        assert!(Rate::parse("10furlongs")
            .unwrap_err()
            .contains("unknown unit"));
        assert!(Rate::parse("0mbit").unwrap_err().contains("out of range"));
        // Not "write 0mbit", which the line above refuses.
        let zero = Rate::parse("0").unwrap_err();
        assert!(
            zero.contains("carries nothing") && !zero.contains("\"0mbit\""),
            "{zero}"
        );
        assert!(Rate::parse("1.2.3mbit")
            .unwrap_err()
            .contains("not a number"));
    }

    #[test]
    fn displays_shortest_exact_form() {
        assert_eq!(Rate::from_bits(100_000_000).to_string(), "100mbit");
        assert_eq!(Rate::from_bits(1_500_000).to_string(), "1500kbit");
        assert_eq!(Rate::from_bits(12_345).to_string(), "12345bit");
        assert_eq!(Rate::from_bits(100_000_000).tc_arg(), "100000000bit");
    }
}
