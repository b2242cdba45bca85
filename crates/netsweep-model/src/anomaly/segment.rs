//! A step at a TCP segment boundary, named: past the path's maximum segment size a message
//! takes one more segment, and its receiver sends one more ACK, per transfer. Measured on
//! loopback (MTU 65 536, IP_MTU 65 535, MSS 65 483), tcp pingpong with both ends on one CPU:
//! up to 65 000 B one data segment per message, from 65 533 B two data segments and an ACK
//! (`nstat` TcpExtTCPOrigDataSent 1.14 → 2.28, TcpOutSegs 1.14 → 3.43 per message, warm-ups
//! included) — the default run's step between 49 155 and 65 533 B.

use super::{Anomaly, AnomalyKind};
use crate::results::RunResult;
use crate::spec::{Family, Transport};

/// IPv4 and TCP headers with the timestamp option Linux uses by default (20 + 20 + 12).
const V4_HEADERS: u64 = 52;
/// IPv6 and TCP headers with timestamps (40 + 20 + 12).
const V6_HEADERS: u64 = 72;
/// Boundaries looked at: the first few multiples of the segment size.
const MULTIPLES: u64 = 4;

/// The IP and TCP header bytes of a run's segments, where the run is a TCP stream over IP
/// (tcp or mptcp).
fn headers(run: &RunResult) -> Option<u64> {
    if !matches!(run.spec.transport, Transport::Tcp | Transport::Mptcp) {
        return None;
    }
    match run.spec.family {
        Family::Ipv4 => Some(V4_HEADERS),
        Family::Ipv6 => Some(V6_HEADERS),
        _ => None,
    }
}

/// The run's TCP segment size, from the path MTU its client was granted.
pub fn mss(run: &RunResult) -> Option<u64> {
    let mtu = u64::from(run.granted.client.path_mtu?);
    mtu.checked_sub(headers(run)?).filter(|&m| m > 0)
}

/// Adds the segment boundary to the detail of each cliff or dip whose step spans one.
pub fn explain(run: &RunResult, anomalies: &mut [Anomaly]) {
    let (Some(mss), Some(headers)) = (mss(run), headers(run)) else {
        return;
    };
    for a in anomalies
        .iter_mut()
        .filter(|a| matches!(a.kind, AnomalyKind::Cliff | AnomalyKind::Dip))
    {
        // A cliff's step lies between its two sizes; a dip starts after the size before it,
        // which the anomaly does not keep: its first size is taken as the edge.
        let Some(k) = (1..=MULTIPLES).find(|k| {
            let edge = k * mss;
            a.from_size <= edge && edge < a.to_size
        }) else {
            continue;
        };
        a.detail.push_str(&format!(
            "; it spans the path's TCP segment size ({} × {mss} B: the path MTU less {} B of IP \
             and TCP headers with timestamps): past it a message takes {} data segments and \
             one more ACK from its receiver",
            k,
            headers,
            k + 1
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(transport: Transport, family: Family, mtu: Option<u32>) -> RunResult {
        let mut r =
            crate::results::load(include_str!("../../../../tests/data/tcp-pingpong.json")).unwrap();
        r.spec.transport = transport;
        r.spec.family = family;
        r.granted.client.path_mtu = mtu;
        r
    }

    fn cliff(from: u64, to: u64) -> Anomaly {
        Anomaly {
            kind: AnomalyKind::Cliff,
            from_size: from,
            to_size: to,
            magnitude: 0.4,
            confidence: 0.99,
            points: 10,
            metric: "throughput".into(),
            detail: "throughput steps down 40% between them".into(),
            hint: None,
            refine: None,
        }
    }

    #[test]
    fn a_step_across_loopbacks_segment_size_is_named() {
        let r = run(Transport::Tcp, Family::Ipv4, Some(65535));
        assert_eq!(mss(&r), Some(65483));
        let mut a = [cliff(49155, 65533), cliff(1_048_579, 1_572_861)];
        explain(&r, &mut a);
        assert!(
            a[0].detail.contains("TCP segment size (1 × 65483 B"),
            "{}",
            a[0].detail
        );
        assert!(a[0].detail.contains("2 data segments"), "{}", a[0].detail);
        assert!(
            !a[1].detail.contains("segment"),
            "no boundary near 1 MiB: {}",
            a[1].detail
        );
    }

    #[test]
    fn only_tcp_over_ip_with_a_known_mtu_has_a_segment_size() {
        assert_eq!(mss(&run(Transport::Udp, Family::Ipv4, Some(1500))), None);
        assert_eq!(mss(&run(Transport::Tcp, Family::Ipv4, None)), None);
        assert_eq!(
            mss(&run(Transport::Tcp, Family::Ipv6, Some(1500))),
            Some(1428)
        );
        assert_eq!(
            mss(&run(Transport::Mptcp, Family::Ipv4, Some(1500))),
            Some(1448)
        );
        assert_eq!(mss(&run(Transport::Tcp, Family::Ipv4, Some(40))), None);
        let r = run(Transport::Tcp, Family::Ipv4, Some(1500));
        let mut a = [cliff(2800, 2900), cliff(1000, 1400)];
        explain(&r, &mut a);
        assert!(a[0].detail.contains("2 × 1448 B"), "{}", a[0].detail);
        assert!(!a[1].detail.contains("segment"), "{}", a[1].detail);
    }
}
