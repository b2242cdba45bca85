//! Wall-clock timestamps (UTC, RFC 3339) without a date library, and the grammar of times
//! (`40ms`, `0.5s`) every time flag and spec uses.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn parts(t: SystemTime) -> (i64, u32, u32, u64, u64, u64) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400) as u64;
    (y, m, d, s / 3600, s / 60 % 60, s % 60)
}

/// `2026-11-22T21:22:34Z`
pub fn rfc3339(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = parts(t);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// `20261122-212234`, for file names.
pub fn compact(t: SystemTime) -> String {
    let (y, m, d, hh, mm, ss) = parts(t);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

/// What every time value says about its units, in `--help` and in errors.
pub const TIME_UNITS: &str =
    "a number with a unit: ns, us, ms, s or m (40ms, 0.5s, 2m); a bare number is seconds";

/// Parses a time: `40ms`, `0.5s`, `2m`, `100us`; a bare number is seconds, as iperf3,
/// netperf and NPtcp users type it. Positive, at most a day.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a time: use {TIME_UNITS}"))?;
    let secs = match unit.trim() {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "s" | "" => v,
        "m" | "min" => v * 60.0,
        other => return Err(format!("unknown unit '{other}' in '{s}': use {TIME_UNITS}")),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 86_400.0 {
        return Err(format!(
            "'{s}' is out of range: give a positive time up to a day ({TIME_UNITS})"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_382_554);
        assert_eq!(rfc3339(t), "2026-11-22T21:22:34Z");
        assert_eq!(compact(t), "20261122-212234");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }
}
