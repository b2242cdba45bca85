//! Prose in a scenario (its title, description, notes, a claim's words) carries no measured
//! number: a page's numbers come from its results. A number followed by a unit (`84 µs`,
//! `2.4×`, `95 Mbit/s`, `18 %`) is refused unless the scenario configures that number
//! somewhere (a rate, a size, an argument: "a 100 Mbit/s link" describes the setup).

/// Units that make a number a measurement when it follows one.
const UNITS: &[&str] = &[
    "ns",
    "us",
    "µs",
    "μs",
    "ms",
    "s",
    "sec",
    "seconds",
    "b",
    "byte",
    "bytes",
    "kb",
    "kib",
    "mb",
    "mib",
    "gb",
    "gib",
    "bit",
    "kbit",
    "mbit",
    "gbit",
    "bps",
    "kbps",
    "mbps",
    "gbps",
    "pps",
    "%",
    "×",
    "x",
    "times",
    "percent",
    "frames",
    "packets",
    "datagrams",
    "segments",
];

/// Every number written in `config` (arguments, rates, sizes, levels), as text without
/// separators: "64k" gives "64", "1.5gbit" gives "1.5".
pub fn configured_numbers<'a>(config: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    for text in config {
        for (n, _) in numbers(text) {
            out.push(n);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Numbers in `text` with their end offset: digits, with '.' or ',' between digits.
fn numbers(text: &str) -> Vec<(String, usize)> {
    let c: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let starts = c[i].1.is_ascii_digit()
            && (i == 0 || !(c[i - 1].1.is_alphanumeric() || c[i - 1].1 == '_'));
        if !starts {
            i += 1;
            continue;
        }
        let mut n = String::new();
        while i < c.len() {
            let ch = c[i].1;
            // '.' before a digit is a decimal point; ',' a thousands separator only before
            // exactly three digits ("1,000"; "1000,1472" is a list).
            let three = (1..=3).all(|k| c.get(i + k).is_some_and(|(_, d)| d.is_ascii_digit()))
                && !c.get(i + 4).is_some_and(|(_, d)| d.is_ascii_digit());
            let sep = !n.is_empty()
                && match ch {
                    '.' => c.get(i + 1).is_some_and(|(_, d)| d.is_ascii_digit()),
                    ',' => three,
                    _ => false,
                };
            if ch.is_ascii_digit() {
                n.push(ch);
            } else if sep {
                if ch == '.' {
                    n.push('.');
                }
            } else {
                break;
            }
            i += 1;
        }
        let end = c.get(i).map_or(text.len(), |(o, _)| *o);
        out.push((n, end));
    }
    out
}

/// The unit right after a number (spaces, a no-break space or a hyphen between), if any.
fn unit_after(text: &str) -> Option<String> {
    let rest = text.trim_start_matches([' ', '\u{a0}', '\u{202f}', '-']);
    let word: String = rest
        .chars()
        .take_while(|c| c.is_alphabetic() || matches!(c, '%' | '×' | 'µ' | 'μ' | '/'))
        .collect();
    let base = word.split('/').next().unwrap_or("").to_lowercase();
    let base = if base.is_empty() && word.starts_with('%') {
        "%".to_string()
    } else {
        base
    };
    UNITS.contains(&base.as_str()).then_some(word)
}

/// Checks one prose field: `Err` names the number and the fix.
pub fn check(field: &str, text: &str, configured: &[String]) -> Result<(), String> {
    for (n, end) in numbers(text) {
        let Some(unit) = unit_after(&text[end..]) else {
            continue;
        };
        if configured.iter().any(|c| c == &n) {
            continue;
        }
        let start = end.saturating_sub(n.len() + 24);
        let start = (0..=start)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        let stop = (end + unit.len() + 16).min(text.len());
        let stop = (stop..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        let _ = field;
        return Err(format!(
            "\"…{}…\" quotes a measured number ({n} {unit} is set nowhere in the scenario): \
             a page's numbers come from its results — state it as a claim (check = \"…\") or leave the number out",
            text[start..stop].trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_numbers_are_refused_and_configured_ones_kept() {
        let conf = configured_numbers(["100mbit", "--sizes", "1000", "64k"]);
        assert_eq!(conf, ["100", "1000", "64"]);
        assert_eq!(
            configured_numbers(["1472,8972,65507"]),
            ["1472", "65507", "8972"]
        );
        assert!(check(
            "description",
            "1000-byte round trips on a 100 Mbit/s link",
            &conf
        )
        .is_ok());
        assert!(check("description", "band 6 beat band 1 in 7 of 7 runs", &conf).is_ok());
        let e = check("description", "idle bands cost 84.5 µs each", &conf).unwrap_err();
        assert!(e.contains("84.5 µs") && e.contains("as a claim"), "{e}");
        let e = check("says", "DLPI is 7% faster", &conf).unwrap_err();
        assert!(e.contains("7 %"), "{e}");
        assert!(check("says", "alignment doubles it: 2.4× the rate", &conf).is_err());
        assert!(check("says", "1,000 B", &conf).is_ok(), "1,000 is 1000");
        assert!(check("says", "seed002 and v2 run", &conf).is_ok());
        assert!(check("says", "über 5 µs", &conf).is_err());
    }
}
