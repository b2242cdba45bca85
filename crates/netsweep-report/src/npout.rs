//! NetPIPE's np.out: three columns — bytes, Mbit/s, seconds per transfer — so existing
//! gnuplot scripts draw netsweep runs unchanged.

use netsweep_model::results::PointResult;

/// One np.out line: seconds per transfer is [`PointResult::transfer_ns`] (RTT/2 for
/// pingpong, NetPIPE's definition), 0 for a point that measured no rate.
pub fn row(p: &PointResult) -> String {
    let secs = p.transfer_ns().map_or(0.0, |ns| ns / 1e9);
    format!(
        "{:>10} {:>16.8} {:>16.8}\n",
        p.size, p.throughput_mbps.mean, secs
    )
}
