//! NetPIPE's np.out: three columns — bytes, Mbit/s, seconds per transfer — so existing
//! gnuplot scripts draw netsweep runs unchanged.

use netsweep_core::results::PointResult;

/// One np.out line. Seconds per transfer is RTT/2 for pingpong (NetPIPE's definition), and
/// the time one message takes at the measured rate for stream.
pub fn row(p: &PointResult) -> String {
    let secs = match &p.latency {
        Some(l) => l.half_rtt_ns.mean / 1e9,
        None if p.throughput_mbps.mean > 0.0 => {
            p.size as f64 * 8.0 / (p.throughput_mbps.mean * 1e6)
        }
        None => 0.0,
    };
    format!(
        "{:>10} {:>16.8} {:>16.8}\n",
        p.size, p.throughput_mbps.mean, secs
    )
}
