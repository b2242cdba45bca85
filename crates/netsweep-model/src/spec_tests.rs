//! Tests of the run spec: validation, the session setup it yields.

use super::*;

#[test]
fn transport_names_round_trip() {
    for t in Transport::ALL {
        assert_eq!(Transport::parse(t.name()), Some(t));
    }
    assert_eq!(Transport::parse("unix"), Some(Transport::UnixStream));
    assert_eq!(Transport::parse("sctp"), None);
    for a in Api::ALL {
        assert_eq!(Api::parse(a.name()), Some(a));
    }
}

#[test]
fn uring_and_shm_are_known() {
    assert_eq!(Api::parse("io_uring"), Some(Api::Uring));
    assert_eq!(Transport::parse("shm"), Some(Transport::Shm));
    assert!(!Transport::Shm.is_datagram() && Transport::UnixSeqpacket.is_datagram());
}

/// A udp-like transport: every api and pattern, datagrams of at most 65,507 bytes.
struct UdpLike;

impl TransportRules for UdpLike {
    fn check(&self, api: Api, _: Pattern) -> Result<(), String> {
        match api {
            Api::Splice => Err("udp does not support --api splice".into()),
            _ => Ok(()),
        }
    }
    fn max_message(&self, _: Api, _: bool) -> Option<u64> {
        Some(65_507)
    }
}

#[test]
fn validate_rejects_bad_combinations() {
    let mut s = RunSpec::new(Transport::Udp, Pattern::Stream, Family::Ipv4);
    assert!(s.validate(&UdpLike).unwrap_err().contains("--sizes"));
    s.sizes = vec![8];
    assert!(s.validate(&UdpLike).unwrap_err().contains("at least 20"));
    s.sizes = vec![70_000];
    assert!(s.validate(&UdpLike).unwrap_err().contains("65507"));
    s.sizes = vec![1472];
    assert_eq!(s.validate(&UdpLike), Ok(()));
    s.api = Api::Splice;
    assert!(s.validate(&UdpLike).unwrap_err().contains("--api splice"));
    s.api = Api::Basic;
    s.precision = 0.0;
    assert!(s.validate(&UdpLike).unwrap_err().contains("--precision"));
    s.precision = 0.02;
    s.reverse = true;
    assert_eq!(s.validate(&UdpLike), Ok(()));
    assert!(s.session_setup().reverse);
    s.pattern = Pattern::Pingpong;
    assert!(s.validate(&UdpLike).unwrap_err().contains("-p stream -R"));
    s.reverse = false;
    s.interval_ns = 100_000_000;
    assert!(s
        .validate(&UdpLike)
        .unwrap_err()
        .contains("not of pingpong"));
    s.pattern = Pattern::Stream;
    assert_eq!(s.validate(&UdpLike), Ok(()));
    s.interval_ns = 999_999;
    assert!(s.validate(&UdpLike).unwrap_err().contains("at least 1ms"));
    s.interval_ns = 1_000_000;
    s.trial_time_ns = 20_000_000_000;
    assert!(s
        .validate(&UdpLike)
        .unwrap_err()
        .contains("20000 intervals"));
}

#[test]
fn messages_are_datagrams_over_a_datagram_transport_or_quics_datagram_api() {
    assert!(datagrams(Transport::Udp, Api::Basic));
    assert!(datagrams(Transport::UnixDgram, Api::Mmsg));
    assert!(datagrams(Transport::Quic, Api::Datagram));
    assert!(!datagrams(Transport::Quic, Api::Basic));
    assert!(!datagrams(Transport::Tcp, Api::Basic));
    assert!(!datagrams(Transport::Tls, Api::Basic));
    // A run asks the same rule.
    let mut s = RunSpec::new(Transport::Quic, Pattern::Pingpong, Family::Ipv4);
    s.api = Api::Datagram;
    assert!(s.datagrams());
    s.api = Api::Basic;
    assert!(!s.datagrams());
}
