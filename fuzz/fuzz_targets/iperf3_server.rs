//! What an iperf3 client sends a `serve --iperf3`, on arbitrary bytes: its parameters frame
//! (`Request::parse`), its results frame (`ServerReport::parse`, which reads both roles'
//! results) and its UDP datagrams (`UdpReceiver::take`, both counter widths) — an error or a
//! value, never a panic; the receiver's counts never wrap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_iperf3::outcome::ServerReport;
use netsweep_iperf3::request::Request;
use netsweep_iperf3::wire::UdpReceiver;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Request::parse(data) {
        let _ = (r.streams_to_server(), r.streams_from_server());
    }
    let _ = ServerReport::parse(data);
    let mut rx = UdpReceiver::default();
    for (i, d) in data.chunks(20).enumerate() {
        rx.take(d, i % 2 == 0, i as u32, (i as u32).wrapping_mul(7919));
        assert!(rx.jitter.is_finite() && rx.jitter >= 0.0);
    }
});
