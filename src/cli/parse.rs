//! Parsing of command-line values (clap value parsers): durations, fractions, byte sizes, on/off.

use std::time::Duration;

/// Parses a time flag's value: `40ms`, `0.5s`, `2m`, `100us`; a bare number is seconds, as
/// iperf3, netperf and NPtcp users type it. The clap value parser of every time flag.
pub fn duration(s: &str) -> Result<Duration, String> {
    netsweep_model::time::parse_duration(s)
}

/// `--start-at`: seconds since the Unix epoch, with a fraction if wanted (kept to the
/// nanosecond: `1796623000.25` is exactly a quarter of a second past).
pub fn unix_time(s: &str) -> Result<std::time::SystemTime, String> {
    let bad = || {
        format!(
            "'{s}' is not a time in seconds since the Unix epoch (e.g. 1796623000.25; `date \
             +%s.%N` prints one)"
        )
    };
    let (whole, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 11 || !digits(whole) || !digits(frac) {
        return Err(bad());
    }
    let secs: u64 = whole.parse().map_err(|_| bad())?;
    let mut nanos = 0u32;
    for (i, b) in frac.bytes().take(9).enumerate() {
        nanos += u32::from(b - b'0') * 10u32.pow(8 - i as u32);
    }
    if secs == 0 && nanos == 0 {
        return Err(bad());
    }
    Ok(std::time::UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Parses `2%` or `0.02` (clap names the flag in its error).
pub fn fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = if let Some(p) = t.strip_suffix('%') {
        p.trim().parse::<f64>().map(|x| x / 100.0)
    } else {
        t.parse::<f64>()
    }
    .map_err(|_| {
        format!("'{s}' is not a fraction: use a percentage like 2% or a fraction like 0.02")
    })?;
    if !(v > 0.0 && v < 1.0) {
        return Err(format!(
            "'{s}' is out of range: give a value between 0% and 100%"
        ));
    }
    Ok(v)
}

/// Parses one byte size with the `--sizes` grammar (`64k`, `8M`, `1472`).
pub fn size(s: &str) -> Result<u64, String> {
    match netsweep_model::sizes::parse_sizes(s) {
        Ok(v) if v.len() == 1 => Ok(v[0]),
        _ => Err(format!("'{s}' is not one size: use one such as 256k or 4M")),
    }
}

/// Parses `--arrivals` (constant or poisson).
pub fn arrivals(s: &str) -> Result<netsweep_model::load::Arrivals, String> {
    netsweep_model::load::Arrivals::parse(s)
        .ok_or_else(|| format!("unknown arrival process '{s}': give constant or poisson"))
}

/// Parses on/off (also true/false, yes/no, 1/0).
pub fn on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("'{s}' is neither on nor off: use on or off")),
    }
}

/// `--auth-key FILE`: the key file, read and checked when the command line is parsed, so a
/// missing or short key is a usage error naming the fix.
pub fn auth_key(path: &str) -> Result<netsweep_engine::auth::AuthKey, String> {
    netsweep_engine::auth::AuthKey::load(std::path::Path::new(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("40ms"), Ok(Duration::from_millis(40)));
        assert_eq!(duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        // A bare number is seconds, never milliseconds.
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("0.25"), Ok(Duration::from_millis(250)));
        let e = duration("fast").unwrap_err();
        assert!(e.contains("bare number is seconds"), "{e}");
        assert!(duration("5h").unwrap_err().contains("unit 'h'"));
        assert!(duration("0s").is_err());
        assert!(duration("1e9").is_err(), "exponents are not a unit");
    }

    #[test]
    fn fractions() {
        assert_eq!(fraction("2%"), Ok(0.02));
        assert_eq!(fraction("0.05"), Ok(0.05));
        assert!(fraction("150%").is_err());
        assert!(fraction("x").is_err());
    }

    #[test]
    fn sizes_and_switches() {
        assert_eq!(size("64k"), Ok(65536));
        assert!(size("1,2").is_err());
        assert_eq!(on_off("OFF"), Ok(false));
        assert!(on_off("maybe").is_err());
    }
}
