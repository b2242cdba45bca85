//! `tls` on the wire: what crosses between the two ends is TLS 1.3 records — after the
//! session cookie, a ClientHello in the clear, then application-data records only — the
//! plaintext never appears, and the records cost what RFC 8446 says (22 bytes each); a
//! client handed another certificate's fingerprint refuses the server by name.

use crate::common::*;
use netsweep_endpoint::{recv_message, send_message, DataListener, Endpoint, TransportFactory};
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_proto::messages::{DataEndpoint, Knobs};
use netsweep_transport::Registry;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

/// A TCP relay on loopback to `to`, keeping every byte the client sent.
fn relay(to: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let mut s = TcpStream::connect(("127.0.0.1", to)).unwrap();
        let (mut c2, mut s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
        let back = thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(Shutdown::Write);
        });
        let mut b = [0u8; 65536];
        loop {
            match c.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    keep.lock().unwrap().extend_from_slice(&b[..n]);
                    if s.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = s.shutdown(Shutdown::Write);
        let _ = back.join();
    });
    (port, seen)
}

/// Both ends of a `tls` data path through the relay: (client, server, the client's bytes,
/// the certificate the listener announced).
struct Relayed(
    std::io::Result<Box<dyn Endpoint>>,
    std::io::Result<Box<dyn Endpoint>>,
    Arc<Mutex<Vec<u8>>>,
    String,
);

/// A `tls` listener and a client reaching it through the relay, told to accept `pin`
/// (the listener's own announced fingerprint when `None`).
fn through_relay(pin: Option<String>) -> Relayed {
    let s = setup(
        Transport::Tls,
        Api::Basic,
        Pattern::Stream,
        1 << 20,
        &Knobs::default(),
    );
    let lo = IpAddr::from([127, 0, 0, 1]);
    let mut l: Box<dyn DataListener> = Registry.listen(&s, lo, lo).unwrap();
    let data = l.endpoint();
    let announced = data
        .tls_fingerprint
        .clone()
        .expect("a tls listener announces its certificate");
    let (port, seen) = relay(data.port);
    let c = cookie();
    let h = thread::spawn(move || l.accept(c, TIMEOUT));
    let via = DataEndpoint {
        port,
        tls_fingerprint: Some(pin.unwrap_or(announced.clone())),
        ..data
    };
    let ce = Registry.connect(&s, &Knobs::default(), lo, &via, c, TIMEOUT);
    let se = h.join().unwrap();
    Relayed(ce, se, seen, announced)
}

/// The TLS records in `wire`: (content type, length) of each, from the first record on.
fn records(wire: &[u8]) -> Vec<(u8, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 5 <= wire.len() {
        let len = u16::from_be_bytes([wire[at + 3], wire[at + 4]]) as usize;
        // TLS 1.3's legacy record version: 3.1 on a ClientHello, 3.3 after it.
        let v = &wire[at + 1..at + 3];
        assert!(
            v == [3, 3] || (at == 0 && v == [3, 1]),
            "record version {v:?} at byte {at}"
        );
        out.push((wire[at], len));
        at += 5 + len;
    }
    assert_eq!(
        at,
        wire.len(),
        "the client's bytes end on a record boundary"
    );
    out
}

#[test]
fn the_wire_carries_sealed_records_and_never_the_plaintext() {
    let Relayed(c, s, seen, _) = through_relay(None);
    let (mut c, mut s) = (c.unwrap(), s.unwrap());
    // A message no cipher output would contain by chance: a repeated marker.
    let marker = b"netsweep-plaintext-marker-";
    let msg: Vec<u8> = marker.iter().copied().cycle().take(100_000).collect();
    let mut got = vec![0u8; msg.len()];
    let rx = thread::spawn(move || {
        recv_message(s.as_mut(), &mut got).unwrap();
        (got, s)
    });
    send_message(c.as_mut(), &msg).unwrap();
    let (got, s) = rx.join().unwrap();
    assert!(got == msg, "the server received the message intact");
    for (side, g) in [("client", c.granted()), ("server", s.granted())] {
        let t = g
            .tls
            .unwrap_or_else(|| panic!("{side} reports its TLS session"));
        assert_eq!(t.version, "TLSv1.3", "{side}");
        assert!(
            t.cipher_suite.starts_with("TLS13_"),
            "{side}: {}",
            t.cipher_suite
        );
        assert_eq!(t.key_exchange, "X25519", "{side}");
        assert!(t.records.contains("user space"), "{side}");
        assert!(!t.kernel_tls.is_empty(), "{side}");
    }
    drop(c);
    drop(s);
    thread::sleep(std::time::Duration::from_millis(100));
    let wire = seen.lock().unwrap().clone();
    // The cookie first (8 bytes, in the clear as on tcp), then records.
    let recs = records(&wire[8..]);
    assert_eq!(
        recs[0].0, 22,
        "a ClientHello (handshake record) opens the connection"
    );
    assert!(
        recs[1..].iter().all(|&(t, _)| t == 23 || t == 20),
        "after the ClientHello only application-data records (and TLS 1.3's compatibility \
         ChangeCipherSpec) cross: {recs:?}"
    );
    assert!(
        !wire.windows(marker.len()).any(|w| w == marker),
        "the plaintext crossed the wire"
    );
    // Every application-data record adds a 5-byte header, a content-type byte and a 16-byte
    // tag; the client's last ones are its Finished and a close_notify alert.
    let app: Vec<usize> = recs.iter().filter(|r| r.0 == 23).map(|r| r.1).collect();
    let sealed: usize = app.iter().sum();
    let overhead = 17 * app.len();
    let finished_and_alert = sealed - overhead - msg.len();
    assert!(
        app.iter().all(|&l| l <= 16_384 + 256),
        "records within TLS 1.3's limit: {app:?}"
    );
    assert!(
        [36, 38, 52, 54].contains(&finished_and_alert),
        "sealed {sealed} B in {} records = message {} + 17 B per record + the client's \
         Finished (36 B with SHA-256, 52 with SHA-384) and perhaps a close_notify (2 B): \
         {finished_and_alert} B left over",
        app.len(),
        msg.len()
    );
}

#[test]
fn a_client_told_another_certificate_refuses_the_server() {
    let other = netsweep_transport::tls::identity::generate()
        .unwrap()
        .fingerprint;
    let Relayed(c, _s, _, announced) = through_relay(Some(other.clone()));
    assert_ne!(other, announced);
    let e = c.err().expect("the handshake fails").to_string();
    assert!(
        e.contains(&announced) && e.contains(&other) && e.contains("certificate"),
        "the refusal names both certificates: {e}"
    );
}
