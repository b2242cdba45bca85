//! The arithmetic a reader of an experiment needs, computed rather than typed: bytes on the
//! wire per message (headers, segments, fragments), the goodput a shaped link leaves after
//! headers (docs/lab.md's table), the round trip a shaper's rate allows, the offered bit rate
//! on the wire, and the link a run crossed, read from the lab it recorded.

use crate::results::PointResult;
use crate::spec::{Family, Pattern, RunSpec, Transport};
use serde::{Deserialize, Serialize};

/// Ethernet header a veth's qdisc charges per frame (no preamble, gap or FCS).
pub const ETHERNET: u64 = 14;
/// TCP header with the timestamp option Linux sends by default.
pub const TCP_HEADER: u64 = 32;
/// UDP header.
pub const UDP_HEADER: u64 = 8;
/// Largest TLS 1.3 record's plaintext (RFC 8446 §5.1).
pub const TLS_RECORD: u64 = 16_384;
/// What a TLS 1.3 record adds to its plaintext: the 5-byte header, the inner content type
/// and a 16-byte AEAD tag (AES-GCM, ChaCha20-Poly1305).
pub const TLS_RECORD_OVERHEAD: u64 = 5 + 1 + 16;
/// The largest UDP payload a `quic` packet fills once path-MTU discovery has probed up to
/// quinn's default ceiling (1452: an Ethernet MTU of 1500 less IPv6 and UDP headers).
pub const QUIC_UDP_PAYLOAD: u64 = 1452;
/// What a 1-RTT `quic` packet carrying one STREAM frame adds to its data: the short header
/// (flags, an 8-byte connection ID, a 2-byte packet number), the STREAM frame's type,
/// stream ID, offset and length (1 + 1 + 4 + 2 typical) and the 16-byte AEAD tag. ACK frames
/// the packet may also carry are not counted.
pub const QUIC_PACKET_OVERHEAD: u64 = 1 + 8 + 2 + (1 + 1 + 4 + 2) + 16;

/// The link a run crossed: the one that holds the address the client targeted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    /// Link or tunnel name.
    pub name: String,
    /// Its MTU.
    pub mtu: u32,
    /// The rate shaping what the client sends toward the server, bits/s, when shaped: the
    /// htb class's ceiling when the run's SO_PRIORITY selects a class.
    pub rate_bps: Option<u64>,
    /// Why `rate_bps` is what it is ("link rate", "class 1:10 ceiling").
    pub rate_from: String,
}

fn ip_header(family: Family) -> u64 {
    match family {
        Family::Ipv6 => 40,
        _ => 20,
    }
}

/// Bytes one message of `size` puts on the wire (frames with every header), and how many
/// frames it takes; `None` for transports that cross no link (unix, shm, mpi).
pub fn wire(transport: Transport, family: Family, mtu: u32, size: u64) -> Option<(u64, u64)> {
    let mtu = u64::from(mtu);
    let ip = ip_header(family);
    match transport {
        Transport::Tls => {
            let records = size.div_ceil(TLS_RECORD).max(1);
            wire(
                Transport::Tcp,
                family,
                u32::try_from(mtu).ok()?,
                size + records * TLS_RECORD_OVERHEAD,
            )
        }
        Transport::Quic => {
            let payload = mtu
                .checked_sub(ip + UDP_HEADER)?
                .min(QUIC_UDP_PAYLOAD)
                .checked_sub(QUIC_PACKET_OVERHEAD)
                .filter(|p| *p > 0)?;
            let frames = size.div_ceil(payload).max(1);
            Some((
                size + frames * (QUIC_PACKET_OVERHEAD + UDP_HEADER + ip + ETHERNET),
                frames,
            ))
        }
        Transport::Tcp | Transport::Mptcp => {
            let mss = mtu.checked_sub(ip + TCP_HEADER).filter(|m| *m > 0)?;
            let frames = size.div_ceil(mss).max(1);
            Some((size + frames * (TCP_HEADER + ip + ETHERNET), frames))
        }
        Transport::Udp | Transport::Udplite => {
            let l4 = size + UDP_HEADER;
            if l4 + ip <= mtu {
                return Some((l4 + ip + ETHERNET, 1));
            }
            let frag = (mtu.checked_sub(ip)? / 8) * 8;
            if frag == 0 {
                return None;
            }
            let frames = l4.div_ceil(frag);
            Some((l4 + frames * (ip + ETHERNET), frames))
        }
        Transport::Packet | Transport::Xdp => Some((size + ETHERNET, 1)),
        _ => None,
    }
}

/// Receiver goodput a link of `rate_bps` leaves for a stream of `size`-byte messages after
/// every header (docs/lab.md: rate × payload ÷ (payload + headers)), Mbit/s.
pub fn goodput_limit(rate_bps: f64, mtu: u32, spec: &RunSpec, size: u64) -> Option<f64> {
    if !matches!(spec.pattern, Pattern::Stream | Pattern::Bidir) {
        return None;
    }
    let (bytes, _) = wire(spec.transport, spec.family, mtu, size.max(1))?;
    Some(rate_bps / 1e6 * size.max(1) as f64 / bytes as f64)
}

/// The least round trip a link shaped to `rate_bps` (each way) sustains for a pingpong of
/// `size`, ns: each direction's token bucket must earn one message's frames per round trip,
/// and the two refill at once, so a round trip takes at least one message's wire time.
pub fn shaper_rtt_ns(rate_bps: f64, mtu: u32, spec: &RunSpec, size: u64) -> Option<f64> {
    let (bytes, _) = wire(spec.transport, spec.family, mtu, size)?;
    Some(bytes as f64 * 8.0 / rate_bps * 1e9)
}

/// Payload bytes of one round trip (request and response) of a pingpong point.
pub fn bytes_per_round_trip(size: u64) -> u64 {
    2 * size
}

/// Frames per second the client sends at `payload_mbps` in `size`-byte messages.
pub fn frames_per_sec(spec: &RunSpec, mtu: u32, size: u64, payload_mbps: f64) -> Option<f64> {
    let (_, frames) = wire(spec.transport, spec.family, mtu, size)?;
    if size == 0 {
        return None;
    }
    Some(payload_mbps * 1e6 / 8.0 / size as f64 * frames as f64)
}

/// The bit rate the measured run (and its background flows) offered the link from client to
/// server, headers included, Mbit/s: a stream's sender rate, a pingpong's one request per
/// round trip, plus what the background flows delivered.
pub fn wire_mbps(p: &PointResult, spec: &RunSpec, mtu: u32) -> Option<f64> {
    let (bytes, _) = wire(spec.transport, spec.family, mtu, p.size.max(1))?;
    let factor = bytes as f64 / p.size.max(1) as f64;
    let own = match spec.pattern {
        Pattern::Stream | Pattern::Bidir if !spec.reverse => p.sender_mbps?.mean * factor,
        Pattern::Stream => 0.0,
        Pattern::Pingpong => {
            let rtt = p.latency?.rtt_ns.mean;
            if rtt <= 0.0 {
                return None;
            }
            bytes as f64 * 8.0 / rtt * 1e3
        }
        _ => return None,
    };
    let background: f64 = p
        .background
        .iter()
        .zip(&spec.background)
        .map(|(b, s)| {
            let t = s.transport.unwrap_or(spec.transport);
            let size = s.size.unwrap_or(64 * 1024);
            let f = wire(t, spec.family, mtu, size)
                .map(|(w, _)| w as f64 / size as f64)
                .unwrap_or(1.0);
            b.receiver_mbps * f
        })
        .sum();
    Some(own + background)
}

/// The link (or tunnel) of a recorded lab (`lab.json`, as results carry it) that holds the
/// address `peer` (`ADDR:PORT`) names, with the rate shaping traffic toward it (a shaper's,
/// its class's ceiling, or the path emulator's).
pub fn link_of(lab: &serde_json::Value, peer: &str, spec: &RunSpec) -> Option<LinkFacts> {
    // "ADDR:PORT", or an mpi run's "mpi rank 1 at ADDR:PORT".
    let last = peer.rsplit(' ').next().unwrap_or(peer);
    let addr = last
        .rsplit_once(':')
        .map(|(a, _)| a)
        .unwrap_or(last)
        .trim_matches(['[', ']']);
    // The server's host, and which end of the link it is.
    let end_host = |l: &serde_json::Value| -> Option<(String, &'static str)> {
        ["a", "b"].iter().find_map(|e| {
            let end = l.get(e)?;
            let here = end.get("addr").and_then(|a| a.as_str()) == Some(addr)
                || end.get("addr6").and_then(|a| a.as_str()) == Some(addr);
            here.then(|| Some((end.get("host")?.as_str()?.to_string(), *e)))
                .flatten()
        })
    };
    for l in lab.get("links")?.as_array()? {
        let Some((server, server_end)) = end_host(l) else {
            continue;
        };
        let name = l.get("name")?.as_str()?.to_string();
        let mtu = l.get("mtu")?.as_u64()? as u32;
        let shaper = l.get("shapers").and_then(|s| s.as_array()).and_then(|s| {
            s.iter()
                .find(|s| s.get("toward").and_then(|t| t.as_str()) == Some(server.as_str()))
        });
        let (mut rate_bps, mut rate_from) = (None, String::from("unshaped"));
        if let Some(s) = shaper {
            rate_bps = s.get("rate").and_then(|r| r.as_u64());
            rate_from = "link rate".into();
            let prio = spec.client_knobs.priority;
            let class = s.get("classes").and_then(|c| c.as_array()).and_then(|c| {
                c.iter().find(|c| {
                    prio.is_some()
                        && c.get("skb_priority").and_then(|p| p.as_u64()) == prio.map(u64::from)
                })
            });
            if let Some(c) = class {
                rate_bps = c.get("ceil").and_then(|r| r.as_u64());
                rate_from = format!(
                    "class {} ceiling",
                    c.get("classid").and_then(|i| i.as_str()).unwrap_or("?")
                );
            }
        }
        // A link the path emulator carries: its rate toward the server (its directions are
        // from a, then from b).
        if rate_bps.is_none() {
            let toward = usize::from(server_end == "a");
            if let Some(r) = l
                .pointer(&format!("/emulator/config/directions/{toward}/rate_bps"))
                .and_then(|r| r.as_u64())
            {
                rate_bps = Some(r);
                rate_from = "the path emulator's rate".into();
            }
        }
        return Some(LinkFacts {
            name,
            mtu,
            rate_bps,
            rate_from,
        });
    }
    for t in lab.get("tunnels")?.as_array()? {
        if end_host(t).is_some() {
            return Some(LinkFacts {
                name: t.get("name")?.as_str()?.to_string(),
                mtu: t.get("mtu")?.as_u64()? as u32,
                rate_bps: None,
                rate_from: "tunnel (its underlay's rate is not applied here)".into(),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(t: Transport, p: Pattern) -> RunSpec {
        RunSpec::new(t, p, Family::Ipv4)
    }

    #[test]
    fn goodput_after_headers_matches_the_lab_table() {
        let tcp = spec(Transport::Tcp, Pattern::Stream);
        let g = goodput_limit(100e6, 1500, &tcp, 65536).unwrap();
        // 64 KiB in 46 segments of at most 1448 B: close to 1448/1514 of the rate.
        assert!((g - 95.64).abs() < 0.1, "{g}");
        let udp = spec(Transport::Udp, Pattern::Stream);
        let g = goodput_limit(100e6, 1500, &udp, 1472).unwrap();
        assert!((g - 97.226).abs() < 0.01, "{g}");
        // 3000 B: three fragments of 1480/1480/48 bytes of IPv4 payload.
        assert_eq!(
            wire(Transport::Udp, Family::Ipv4, 1500, 3000),
            Some((3110, 3))
        );
        assert!(goodput_limit(1e8, 1500, &spec(Transport::Tcp, Pattern::Pingpong), 1).is_none());
        assert!(wire(Transport::UnixStream, Family::Ipv4, 1500, 10).is_none());
    }

    #[test]
    fn a_quic_message_is_cut_into_packets_of_the_udp_payload_ceiling() {
        // 1452-byte UDP payloads less 35 bytes of header, frame and tag: 1417 bytes of data.
        assert_eq!(QUIC_UDP_PAYLOAD - QUIC_PACKET_OVERHEAD, 1417);
        let per = QUIC_PACKET_OVERHEAD + UDP_HEADER + 20 + ETHERNET;
        assert_eq!(
            wire(Transport::Quic, Family::Ipv4, 1500, 1),
            Some((1 + per, 1))
        );
        assert_eq!(
            wire(Transport::Quic, Family::Ipv4, 1500, 1418),
            Some((1418 + 2 * per, 2))
        );
        // A 1280-byte IPv6 link leaves 1232 bytes of UDP payload, under the ceiling.
        assert_eq!(
            wire(Transport::Quic, Family::Ipv6, 1280, 1197),
            Some((1197 + QUIC_PACKET_OVERHEAD + UDP_HEADER + 40 + ETHERNET, 1))
        );
        assert_eq!(wire(Transport::Quic, Family::Ipv4, 60, 10), None);
    }

    #[test]
    fn a_pingpong_of_1000_bytes_at_100_mbit_needs_85_microseconds() {
        // Seed 002's audit: one 1066-byte frame each way per round trip, both buckets
        // refilling at once.
        let tcp = spec(Transport::Tcp, Pattern::Pingpong);
        let rtt = shaper_rtt_ns(100e6, 1500, &tcp, 1000).unwrap();
        assert!((rtt - 85_280.0).abs() < 1.0, "{rtt}");
        assert_eq!(bytes_per_round_trip(1000), 2000);
        let f = frames_per_sec(&tcp, 1500, 1000, 8.0).unwrap();
        assert!((f - 1000.0).abs() < 1e-9, "{f}");
    }

    #[test]
    fn the_link_is_found_by_the_peer_address_with_its_class() {
        let lab = serde_json::json!({
            "links": [{
                "name": "client-server", "mtu": 1500,
                "a": {"host": "client", "addr": "198.18.1.1"},
                "b": {"host": "server", "addr": "198.18.1.2"},
                "shapers": [{"toward": "server", "rate": 100000000u64,
                    "classes": [{"classid": "1:10", "skb_priority": 1, "ceil": 40000000u64}]}]
            }],
            "tunnels": []
        });
        let mut s = spec(Transport::Tcp, Pattern::Pingpong);
        let l = link_of(&lab, "198.18.1.2:7200", &s).unwrap();
        assert_eq!((l.mtu, l.rate_bps), (1500, Some(100_000_000)));
        s.client_knobs.priority = Some(1);
        let l = link_of(&lab, "198.18.1.2:7200", &s).unwrap();
        assert_eq!(l.rate_bps, Some(40_000_000));
        assert_eq!(l.rate_from, "class 1:10 ceiling");
        assert!(link_of(&lab, "198.18.9.9:7200", &s).is_none());
    }

    /// Seed 002's strict-priority link: no shaper, the path emulator's rate toward the server
    /// (its directions are from a, then from b). An mpi run's peer names rank 1 first.
    #[test]
    fn an_emulated_link_has_its_emulators_rate_toward_the_server() {
        let dir = |rate: u64| serde_json::json!({"rate_bps": rate, "delay_ns": 0});
        let lab = serde_json::json!({
            "links": [{
                "name": "prio", "mtu": 1500,
                "a": {"host": "client", "addr": "198.18.3.1"},
                "b": {"host": "server", "addr": "198.18.3.2"},
                "shapers": [],
                "emulator": {"config": {"directions": [dir(100_000_000), dir(50_000_000)]}}
            }],
            "tunnels": []
        });
        let s = spec(Transport::Tcp, Pattern::Pingpong);
        let l = link_of(&lab, "198.18.3.2:7200", &s).unwrap();
        assert_eq!(l.rate_bps, Some(100_000_000));
        assert_eq!(l.rate_from, "the path emulator's rate");
        // Toward a, the other direction's rate.
        assert_eq!(
            link_of(&lab, "198.18.3.1:7200", &s).unwrap().rate_bps,
            Some(50_000_000)
        );
        let l = link_of(&lab, "mpi rank 1 at 198.18.3.2:40123", &s).unwrap();
        assert_eq!((l.name.as_str(), l.mtu), ("prio", 1500));
    }
}
