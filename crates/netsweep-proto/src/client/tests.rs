//! Tests of the client machine, alone and driven against the server machine.

use super::*;
use crate::codec::tests::{all_client_msgs, all_server_msgs};
use crate::messages::{DataEndpoint, HostInfo, SessionSetup, SideCounters, TrialSpec};
use crate::preamble::{encode_server_preamble, ServerReply};
use crate::server::{Server, ServerEvent, ServerState};
use crate::test_util::pump;
use crate::version::MAGIC;
use crate::version::PROTOCOL_MAX;

fn hello() -> ClientMsg {
    all_client_msgs().remove(0)
}

fn welcome() -> ServerMsg {
    ServerMsg::Welcome {
        server: HostInfo::default(),
        cookie: 42,
        data: DataEndpoint {
            port: 5001,
            ..DataEndpoint::default()
        },
    }
}

fn counters(bytes: u64) -> SideCounters {
    SideCounters {
        bytes_sent: bytes,
        ..SideCounters::default()
    }
}

fn messages<E: Clone>(events: &[E], pick: impl Fn(&E) -> Option<String>) -> Vec<String> {
    events.iter().filter_map(pick).collect()
}

fn client_kinds(events: &[ClientEvent]) -> Vec<String> {
    messages(events, |e| match e {
        ClientEvent::Message(m) => Some(m.kind().to_string()),
        ClientEvent::Negotiated { .. } => None,
    })
}

fn server_kinds(events: &[ServerEvent]) -> Vec<String> {
    messages(events, |e| match e {
        ServerEvent::Message(m) => Some(m.kind().to_string()),
        ServerEvent::Negotiated { .. } => None,
    })
}

/// A client and server pumped up to `Idle` (negotiated, welcomed, data bound).
fn session_at_idle() -> (Client, Server) {
    let mut c = Client::new();
    let mut s = Server::new();
    pump(&mut c, &mut s);
    c.send(hello()).unwrap();
    pump(&mut c, &mut s);
    s.send(welcome()).unwrap();
    pump(&mut c, &mut s);
    c.send(ClientMsg::DataReady {}).unwrap();
    pump(&mut c, &mut s);
    s.send(all_server_msgs().remove(3)).unwrap();
    pump(&mut c, &mut s);
    assert_eq!(
        (c.state(), s.state()),
        (ClientState::Idle, ServerState::Idle)
    );
    (c, s)
}

#[test]
fn whole_session_through_both_machines() {
    let mut c = Client::new();
    let mut s = Server::new();
    assert_eq!(c.state(), ClientState::AwaitingPreamble);

    let (ce, se) = pump(&mut c, &mut s);
    assert_eq!(
        ce,
        vec![ClientEvent::Negotiated {
            version: PROTOCOL_MAX,
            server: VersionRange::SUPPORTED
        }]
    );
    assert_eq!(
        se,
        vec![ServerEvent::Negotiated {
            version: PROTOCOL_MAX,
            client: VersionRange::SUPPORTED
        }]
    );
    assert_eq!(
        (c.version(), s.version()),
        (Some(PROTOCOL_MAX), Some(PROTOCOL_MAX))
    );
    assert_eq!(c.state(), ClientState::Negotiated);

    c.send(hello()).unwrap();
    let (_, se) = pump(&mut c, &mut s);
    assert_eq!(se, vec![ServerEvent::Message(hello())]);
    assert_eq!(s.state(), ServerState::HelloReceived);

    s.send(welcome()).unwrap();
    let (ce, _) = pump(&mut c, &mut s);
    assert_eq!(ce, vec![ClientEvent::Message(welcome())]);
    assert_eq!(c.state(), ClientState::Welcomed);

    c.send(ClientMsg::DataReady {}).unwrap();
    let (_, se) = pump(&mut c, &mut s);
    assert_eq!(server_kinds(&se), ["data_ready"]);
    let bound = all_server_msgs().remove(3);
    s.send(bound.clone()).unwrap();
    let (ce, _) = pump(&mut c, &mut s);
    assert_eq!(ce, vec![ClientEvent::Message(bound)]);

    for trial in 1..=2 {
        let spec = TrialSpec {
            size: 64 * trial,
            repetitions: 10,
            ..TrialSpec::default()
        };
        c.send(ClientMsg::TrialStart { trial, spec }).unwrap();
        assert_eq!(c.state(), ClientState::AwaitingReady { trial });
        let (_, se) = pump(&mut c, &mut s);
        assert_eq!(server_kinds(&se), ["trial_start"]);
        assert_eq!(s.state(), ServerState::TrialStartReceived { trial });

        s.send(ServerMsg::Ready { trial }).unwrap();
        let (ce, _) = pump(&mut c, &mut s);
        assert_eq!(ce, vec![ClientEvent::Message(ServerMsg::Ready { trial })]);
        assert_eq!(c.state(), ClientState::InTrial { trial });

        c.send(ClientMsg::TrialEnd {
            trial,
            counters: counters(640),
        })
        .unwrap();
        let (_, se) = pump(&mut c, &mut s);
        assert_eq!(server_kinds(&se), ["trial_end"]);

        let report = ServerMsg::TrialReport {
            trial,
            counters: counters(0),
        };
        s.send(report.clone()).unwrap();
        let (ce, _) = pump(&mut c, &mut s);
        assert_eq!(ce, vec![ClientEvent::Message(report)]);
        assert_eq!(c.state(), ClientState::Idle);
    }

    c.send(ClientMsg::Bye {}).unwrap();
    let (ce, se) = pump(&mut c, &mut s);
    assert_eq!(server_kinds(&se), ["bye"]);
    assert_eq!(client_kinds(&ce), ["bye"]);
    assert_eq!(
        (c.state(), s.state()),
        (ClientState::Closed, ServerState::Closed)
    );
    assert_eq!((c.error(), s.error()), (None, None));
    assert_eq!(c.handle_eof(), Ok(()));
    assert_eq!(s.handle_eof(), Ok(()));
    assert_eq!(c.send(ClientMsg::Bye {}), Err(ProtoError::SessionClosed));
}

#[test]
fn server_version_mismatch_reaches_client_with_both_ranges() {
    let mut c = Client::with_versions(VersionRange::new(1, 1));
    let mut s = Server::with_versions(VersionRange::new(2, 3));
    let bytes = c.poll_transmit().unwrap();
    let want = ProtoError::VersionMismatch(VersionMismatch {
        client: VersionRange::new(1, 1),
        server: VersionRange::new(2, 3),
    });
    assert_eq!(s.handle_input(&bytes), Err(want.clone()));
    assert_eq!(
        c.handle_input(&s.poll_transmit().unwrap()),
        Err(want.clone())
    );
    assert_eq!(
        c.error().map(ToString::to_string).as_deref(),
        Some(
            "protocol version mismatch: client speaks 1..=1, server speaks 2..=3; upgrade \
             the older netsweep"
        )
    );
    // Closed for good: the same error again, no panic.
    assert_eq!(c.send(hello()), Err(want.clone()));
    assert_eq!(c.handle_input(b"anything"), Err(want.clone()));
    assert_eq!(c.handle_eof(), Err(want));
    assert_eq!(c.state(), ClientState::Closed);
}

#[test]
fn client_rejects_a_chosen_version_outside_its_range() {
    let mut c = Client::with_versions(VersionRange::new(1, 2));
    let reply = encode_server_preamble(ServerReply {
        chosen: 3,
        server: VersionRange::new(3, 3),
    });
    let err = c.handle_input(&reply).unwrap_err();
    assert_eq!(
        err,
        ProtoError::VersionMismatch(VersionMismatch {
            client: VersionRange::new(1, 2),
            server: VersionRange::new(3, 3),
        })
    );
}

#[test]
fn client_rejects_garbage_reply() {
    let mut c = Client::new();
    let err = c.handle_input(b"HTTP/1.1 400 Bad Request\r\n").unwrap_err();
    assert_eq!(
        err,
        ProtoError::BadMagic {
            got: b"HTTP/1.1 4".to_vec()
        }
    );
}

#[test]
fn client_reports_truncated_preamble_and_frame_at_eof() {
    let mut c = Client::new();
    c.handle_input(&MAGIC[..3]).unwrap();
    assert_eq!(
        c.handle_eof(),
        Err(ProtoError::TruncatedPreamble { got: 3 })
    );

    let (mut c, _s) = session_at_idle();
    c.send(ClientMsg::TrialStart {
        trial: 9,
        spec: TrialSpec::default(),
    })
    .unwrap();
    let frame = encode_message(&ServerMsg::Ready { trial: 9 }).unwrap();
    c.handle_input(&frame[..frame.len() - 2]).unwrap();
    assert_eq!(
        c.handle_eof(),
        Err(ProtoError::TruncatedFrame {
            got: frame.len() - 6,
            expected: frame.len() - 4
        })
    );
}

#[test]
fn client_reports_peer_gone_between_frames() {
    let (mut c, _s) = session_at_idle();
    c.send(ClientMsg::TrialStart {
        trial: 1,
        spec: TrialSpec::default(),
    })
    .unwrap();
    let err = c.handle_eof().unwrap_err();
    assert_eq!(
        err.to_string(),
        "the peer closed the control connection while waiting for ready for trial 1"
    );
}

#[test]
fn out_of_order_server_messages_rejected() {
    // Welcome before hello.
    let mut c = Client::new();
    let mut s = Server::new();
    pump(&mut c, &mut s);
    let err = c
        .handle_input(&encode_message(&welcome()).unwrap())
        .unwrap_err();
    assert_eq!(
        err,
        ProtoError::UnexpectedMessage {
            expected: "nothing before hello".into(),
            got: "welcome".into()
        }
    );
    assert_eq!(c.state(), ClientState::Closed);

    // Ready for the wrong trial.
    let (mut c, _s) = session_at_idle();
    c.send(ClientMsg::TrialStart {
        trial: 3,
        spec: TrialSpec::default(),
    })
    .unwrap();
    let err = c
        .handle_input(&encode_message(&ServerMsg::Ready { trial: 4 }).unwrap())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "protocol error: expected ready for trial 3, got ready for trial 4; the peer runs \
         an incompatible or faulty netsweep"
    );

    // A report with no trial outstanding.
    let (mut c, _s) = session_at_idle();
    let report = ServerMsg::TrialReport {
        trial: 1,
        counters: SideCounters::default(),
    };
    let err = c
        .handle_input(&encode_message(&report).unwrap())
        .unwrap_err();
    assert_eq!(
        err,
        ProtoError::UnexpectedMessage {
            expected: "nothing (or bye) between trials".into(),
            got: "trial_report for trial 1".into()
        }
    );
}

#[test]
fn busy_and_error_close_cleanly_with_the_message() {
    for reply in [
        ServerMsg::Busy {
            message: "serving another run".into(),
        },
        ServerMsg::Error {
            message: "no".into(),
        },
    ] {
        let mut c = Client::new();
        let mut s = Server::new();
        pump(&mut c, &mut s);
        c.send(hello()).unwrap();
        pump(&mut c, &mut s);
        s.send(reply.clone()).unwrap();
        let (ce, _) = pump(&mut c, &mut s);
        assert_eq!(ce, vec![ClientEvent::Message(reply)]);
        assert_eq!((c.state(), c.error()), (ClientState::Closed, None));
        assert_eq!(s.state(), ServerState::Closed);
    }
}

#[test]
fn invalid_sends_are_refused_without_closing() {
    let mut c = Client::new();
    let err = c.send(hello()).unwrap_err();
    assert_eq!(
        err,
        ProtoError::InvalidSend {
            state: "waiting for the server's preamble".into(),
            msg: "hello".into()
        }
    );
    assert_eq!(c.state(), ClientState::AwaitingPreamble);

    let (mut c, _s) = session_at_idle();
    let err = c
        .send(ClientMsg::TrialEnd {
            trial: 1,
            counters: SideCounters::default(),
        })
        .unwrap_err();
    assert!(matches!(err, ProtoError::InvalidSend { .. }));
    assert_eq!(c.state(), ClientState::Idle);
    assert_eq!(
        c.send(ClientMsg::Hello {
            setup: SessionSetup::default(),
            client: HostInfo::default(),
            client_nonce: None,
        })
        .map_err(|e| e.to_string()),
        Err(
            "cannot send hello while between trials; this is a bug in netsweep, please \
             report it"
                .into()
        )
    );
}
