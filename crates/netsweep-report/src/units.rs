//! Human-readable units for sizes, times and rates.

/// A byte count with a binary suffix when exact: 1024 → "1 KiB"? No: tables show raw bytes;
/// this is for prose ("peak at 64 KiB").
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
    if u >= 1000.0 {
        format!("{u:.0}")
    } else if u >= 10.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

/// Mbit/s with sensible precision.
pub fn mbps(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
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
}
