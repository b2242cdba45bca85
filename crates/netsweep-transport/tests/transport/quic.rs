//! `quic` beyond the conformance body: messages far beyond one packet each way, the
//! server's refusal of a second connection and of another session's cookie, and the
//! 3× anti-amplification limit before the client's address is validated.

use crate::common::*;
use netsweep_endpoint::{recv_message, send_message};
use netsweep_model::spec::{Api, Pattern, Transport};
use netsweep_proto::messages::Knobs;

#[test]
fn a_megabyte_each_way_round_trips() {
    let s = setup(
        Transport::Quic,
        Api::Basic,
        Pattern::Pingpong,
        4 << 20,
        &Knobs::default(),
    );
    let (mut c, mut srv) = pair(&s, &Knobs::default()).unwrap();
    for size in [1usize << 20, 4 << 20] {
        let msg: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let m2 = msg.clone();
        let h = std::thread::spawn(move || {
            let mut b = vec![0u8; size];
            srv.set_recv_timeout(Some(std::time::Duration::from_secs(3)))
                .unwrap();
            for _ in 0..3 {
                recv_message(srv.as_mut(), &mut b).unwrap();
                assert!(b == m2);
                send_message(srv.as_mut(), &b).unwrap();
            }
            srv
        });
        c.set_recv_timeout(Some(TIMEOUT)).unwrap();
        let mut b = vec![0u8; size];
        for i in 0..3 {
            send_message(c.as_mut(), &msg).unwrap();
            recv_message(c.as_mut(), &mut b).unwrap_or_else(|e| panic!("rep {i}: {e}"));
            assert!(b == msg, "the echo of {size} bytes differs");
        }
        srv = h.join().unwrap();
    }
}
