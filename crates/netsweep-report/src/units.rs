//! Human-readable units for sizes, times and rates.

/// A byte count for prose ("peak at 64 KiB"): in MiB or KiB when it divides exactly, in bytes
/// otherwise (1536 → "1536 B"). Tables show raw bytes.
pub fn size(bytes: u64) -> String {
    const K: u64 = 1024;
    match bytes {
        b if b >= K * K && b % (K * K) == 0 => format!("{} MiB", b / (K * K)),
        b if b >= K && b % K == 0 => format!("{} KiB", b / K),
        b => format!("{b} B"),
    }
}

/// Nanoseconds as µs with sensible precision.
pub fn us(ns: f64) -> String {
    let u = ns / 1e3;
    if let Some(s) = huge(u) {
        s
    } else if u >= 1000.0 {
        format!("{u:.0}")
    } else if u >= 10.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

/// Mbit/s with sensible precision.
pub fn mbps(v: f64) -> String {
    if let Some(s) = huge(v) {
        s
    } else if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// A number too large to print in full (from a hand-edited or corrupt file: 1e308 would be
/// 309 digits), or not finite, in scientific notation: `1.000e308`.
pub fn huge(v: f64) -> Option<String> {
    (!v.is_finite() || v.abs() >= 1e12).then(|| {
        if v.is_finite() {
            format!("{v:.3e}")
        } else {
            format!("{v}")
        }
    })
}

/// `v` to 3 decimals, or [`huge`]'s form when it is huge.
pub fn fixed3(v: f64) -> String {
    huge(v).unwrap_or_else(|| format!("{v:.3}"))
}

/// Trims a formatted decimal: "2.50" → "2.5", "3.00" → "3".
fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A number with up to 3 significant digits, trailing zeros dropped.
pub fn short(v: f64) -> String {
    let a = v.abs();
    let s = if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        let digits = (2 - a.log10().floor() as i32).clamp(0, 12) as usize;
        format!("{v:.digits$}")
    };
    trim(s)
}

/// A size for an axis tick or prose: 1 B, 512 B, 1 KiB, 1.5 KiB, 64 KiB, 1 MiB; a size under
/// 10 KiB that is no whole quarter KiB stays in bytes (1500 B, not 1.46 KiB).
pub fn size_tick(bytes: f64) -> String {
    const K: f64 = 1024.0;
    if bytes < 10.0 * K && bytes.fract() == 0.0 && bytes % 256.0 != 0.0 {
        format!("{} B", bytes as u64)
    } else if bytes >= K * K * K {
        format!("{} GiB", short(bytes / (K * K * K)))
    } else if bytes >= K * K {
        format!("{} MiB", short(bytes / (K * K)))
    } else if bytes >= K {
        format!("{} KiB", short(bytes / K))
    } else {
        format!("{} B", short(bytes))
    }
}

/// A duration given in ns: 850 ns, 3 µs, 1.5 ms, 2 s.
pub fn time_tick(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{} s", short(ns / 1e9))
    } else if a >= 1e6 {
        format!("{} ms", short(ns / 1e6))
    } else if a >= 1e3 {
        format!("{} µs", short(ns / 1e3))
    } else {
        format!("{} ns", short(ns))
    }
}

/// A rate given in Mbit/s: 500 kbit/s, 12 Mbit/s, 1.5 Gbit/s.
pub fn rate_tick(mbps: f64) -> String {
    let a = mbps.abs();
    if a >= 1e3 {
        format!("{} Gbit/s", short(mbps / 1e3))
    } else if a >= 1.0 || a == 0.0 {
        format!("{} Mbit/s", short(mbps))
    } else {
        format!("{} kbit/s", short(mbps * 1e3))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ticks() {
        use super::*;
        assert_eq!(size_tick(1.0), "1 B");
        assert_eq!(size_tick(1024.0), "1 KiB");
        assert_eq!(size_tick(1536.0), "1.5 KiB");
        assert_eq!(size_tick(1500.0), "1500 B");
        assert_eq!(size_tick(8972.0), "8972 B");
        assert_eq!(size_tick(65536.0), "64 KiB");
        assert_eq!(size_tick(1048576.0), "1 MiB");
        assert_eq!(time_tick(3000.0), "3 µs");
        assert_eq!(time_tick(1_500_000.0), "1.5 ms");
        assert_eq!(time_tick(850.0), "850 ns");
        assert_eq!(rate_tick(12.0), "12 Mbit/s");
        assert_eq!(rate_tick(1500.0), "1.5 Gbit/s");
        assert_eq!(rate_tick(0.5), "500 kbit/s");
        assert_eq!(short(0.025), "0.025");
        assert_eq!(short(2.5), "2.5");
    }

    #[test]
    fn formats() {
        assert_eq!(super::size(65536), "64 KiB");
        assert_eq!(super::size(8 << 20), "8 MiB");
        assert_eq!(super::size(1500), "1500 B");
        assert_eq!(super::us(12_345.0), "12.3");
        assert_eq!(super::us(1_500.0), "1.50");
        assert_eq!(super::mbps(12_345.6), "12346");
        assert_eq!(super::mbps(5.0), "5.000");
    }

    #[test]
    fn a_huge_number_is_printed_short() {
        assert_eq!(super::mbps(1e308), "1.000e308");
        assert_eq!(super::us(1e308), "1.000e305");
        assert_eq!(super::fixed3(1e308), "1.000e308");
        assert_eq!(super::fixed3(2.5), "2.500");
        assert_eq!(super::mbps(f64::INFINITY), "inf");
        assert!(super::mbps(9.9e11).len() < 14);
    }
}
