//! Tests of the server machine: preamble negotiation, message order, malformed and random input.

use super::*;
use crate::codec::tests::{all_client_msgs, all_server_msgs};
use crate::frame::{encode_frame, MAX_FRAME};
use crate::messages::{SideCounters, TrialSpec};
use crate::preamble::{decode_server_preamble, encode_client_preamble, SERVER_PREAMBLE_LEN};
use crate::test_util::XorShift;
use crate::version::VersionMismatch;

fn preamble() -> Vec<u8> {
    encode_client_preamble(VersionRange::SUPPORTED).to_vec()
}

fn frame(msg: &ClientMsg) -> Vec<u8> {
    encode_message(msg).unwrap()
}

fn reply_of(server: &mut Server) -> ServerReply {
    let out = server.poll_transmit().unwrap();
    let bytes: &[u8; SERVER_PREAMBLE_LEN] = out[..SERVER_PREAMBLE_LEN].try_into().unwrap();
    decode_server_preamble(bytes).unwrap()
}

/// A server that has received the preamble and `hello` (its output drained).
fn server_after_hello() -> Server {
    let mut s = Server::new();
    let mut wire = preamble();
    wire.extend(frame(&all_client_msgs()[0]));
    s.handle_input(&wire).unwrap();
    s.poll_transmit();
    while s.poll_event().is_some() {}
    assert_eq!(s.state(), ServerState::HelloReceived);
    s
}

/// A server between trials.
fn server_at_idle() -> Server {
    let mut s = server_after_hello();
    s.send(all_server_msgs()[0].clone()).unwrap();
    s.handle_input(&frame(&ClientMsg::DataReady {})).unwrap();
    s.send(all_server_msgs()[3].clone()).unwrap();
    s.poll_transmit();
    while s.poll_event().is_some() {}
    assert_eq!(s.state(), ServerState::Idle);
    s
}

#[test]
fn garbage_preamble_rejected_with_bad_magic_and_a_reply() {
    let mut s = Server::new();
    let err = s
        .handle_input(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap_err();
    assert_eq!(
        err,
        ProtoError::BadMagic {
            got: b"GET / HT".to_vec()
        }
    );
    assert!(err
        .to_string()
        .starts_with("not a netsweep peer (bad magic 47 45 54"));
    assert_eq!(
        reply_of(&mut s),
        ServerReply {
            chosen: 0,
            server: VersionRange::SUPPORTED
        }
    );
    assert_eq!(s.state(), ServerState::Closed);
    assert_eq!(s.handle_input(&preamble()), Err(err.clone()));
    assert_eq!(s.send(all_server_msgs()[2].clone()), Err(err));
    assert_eq!(s.poll_event(), None);
}

#[test]
fn version_mismatch_replies_zero_with_server_range() {
    let mut s = Server::with_versions(VersionRange::new(8, 9));
    let err = s.handle_input(&preamble()).unwrap_err();
    assert_eq!(
        err,
        ProtoError::VersionMismatch(VersionMismatch {
            client: VersionRange::SUPPORTED,
            server: VersionRange::new(8, 9)
        })
    );
    assert_eq!(
        reply_of(&mut s),
        ServerReply {
            chosen: 0,
            server: VersionRange::new(8, 9)
        }
    );
}

#[test]
fn negotiation_picks_highest_common_version() {
    let mut s = Server::with_versions(VersionRange::new(1, 4));
    s.handle_input(&encode_client_preamble(VersionRange::new(2, 3)))
        .unwrap();
    assert_eq!(reply_of(&mut s).chosen, 3);
    assert_eq!(s.version(), Some(3));
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::Negotiated {
            version: 3,
            client: VersionRange::new(2, 3)
        })
    );
}

#[test]
fn session_split_byte_by_byte_decodes() {
    let mut wire = preamble();
    let hello = all_client_msgs()[0].clone();
    wire.extend(frame(&hello));
    let mut s = Server::new();
    for b in &wire {
        s.handle_input(std::slice::from_ref(b)).unwrap();
    }
    assert!(matches!(
        s.poll_event(),
        Some(ServerEvent::Negotiated { .. })
    ));
    assert_eq!(s.poll_event(), Some(ServerEvent::Message(hello)));
    assert_eq!(s.state(), ServerState::HelloReceived);
}

#[test]
fn oversize_frame_from_client_rejected() {
    let mut s = Server::new();
    let mut wire = preamble();
    wire.extend([0xff, 0xff, 0xff, 0xff]);
    let err = s.handle_input(&wire).unwrap_err();
    assert_eq!(
        err,
        ProtoError::FrameTooLarge {
            size: u64::from(u32::MAX),
            max: MAX_FRAME
        }
    );
}

#[test]
fn truncated_frame_then_eof_reported_with_counts() {
    let mut s = Server::new();
    let mut wire = preamble();
    let hello = frame(&all_client_msgs()[0]);
    wire.extend(&hello[..20]);
    s.handle_input(&wire).unwrap();
    let err = s.handle_eof().unwrap_err();
    assert_eq!(
        err,
        ProtoError::TruncatedFrame {
            got: 16,
            expected: hello.len() - 4
        }
    );
    assert_eq!(s.handle_input(b"x"), Err(err));

    let mut s = Server::new();
    s.handle_input(b"NSW").unwrap();
    assert_eq!(
        s.handle_eof(),
        Err(ProtoError::TruncatedPreamble { got: 3 })
    );
}

#[test]
fn out_of_order_client_messages_rejected() {
    // Data_ready before hello.
    let mut s = Server::new();
    let mut wire = preamble();
    wire.extend(frame(&ClientMsg::DataReady {}));
    assert_eq!(
        s.handle_input(&wire),
        Err(ProtoError::UnexpectedMessage {
            expected: "hello or bye".into(),
            got: "data_ready".into()
        })
    );
    // Its negotiation event still arrived before the error.
    assert!(matches!(
        s.poll_event(),
        Some(ServerEvent::Negotiated { .. })
    ));

    // A second message while the server owes a reply.
    let mut s = server_after_hello();
    assert_eq!(
        s.handle_input(&frame(&ClientMsg::DataReady {})),
        Err(ProtoError::UnexpectedMessage {
            expected: "nothing until the server answers hello".into(),
            got: "data_ready".into()
        })
    );

    // Trial_end for another trial than the one running.
    let mut s = server_at_idle();
    s.handle_input(&frame(&ClientMsg::TrialStart {
        trial: 5,
        spec: TrialSpec::default(),
    }))
    .unwrap();
    s.send(ServerMsg::Ready { trial: 5 }).unwrap();
    let err = s
        .handle_input(&frame(&ClientMsg::TrialEnd {
            trial: 6,
            counters: SideCounters::default(),
        }))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "protocol error: expected trial_end for trial 5 or bye, got trial_end for trial 6; \
         the peer runs an incompatible or faulty netsweep"
    );

    // Trial_end with no trial running.
    let mut s = server_at_idle();
    assert_eq!(
        s.handle_input(&frame(&ClientMsg::TrialEnd {
            trial: 1,
            counters: SideCounters::default(),
        })),
        Err(ProtoError::UnexpectedMessage {
            expected: "trial_start or bye".into(),
            got: "trial_end for trial 1".into()
        })
    );
}

#[test]
fn malformed_body_is_a_typed_error() {
    let mut s = Server::new();
    let mut wire = preamble();
    wire.extend(encode_frame(br#"{"type":"launch_missiles"}"#).unwrap());
    let err = s.handle_input(&wire).unwrap_err();
    assert!(
        matches!(&err, ProtoError::Malformed { reason } if reason.contains("launch_missiles")),
        "{err:?}"
    );
}

#[test]
fn bye_is_answered_and_closes() {
    let mut s = server_at_idle();
    s.handle_input(&frame(&ClientMsg::Bye {})).unwrap();
    assert_eq!(
        s.poll_event(),
        Some(ServerEvent::Message(ClientMsg::Bye {}))
    );
    assert_eq!(
        s.poll_transmit(),
        Some(encode_message(&ServerMsg::Bye {}).unwrap())
    );
    assert_eq!((s.state(), s.error()), (ServerState::Closed, None));
    assert_eq!(s.send(ServerMsg::Bye {}), Err(ProtoError::SessionClosed));
}

#[test]
fn invalid_server_sends_refused() {
    let mut s = server_at_idle();
    let err = s.send(ServerMsg::Ready { trial: 1 }).unwrap_err();
    assert_eq!(
        err,
        ProtoError::InvalidSend {
            state: "waiting for trial_start or bye".into(),
            msg: "ready for trial 1".into()
        }
    );
    assert_eq!(s.state(), ServerState::Idle);
    let mut fresh = Server::new();
    assert!(matches!(
        fresh.send(all_server_msgs()[2].clone()),
        Err(ProtoError::InvalidSend { .. })
    ));
}

/// Feeds `chunks` to a fresh server; checks it never panics and that any error sticks.
fn feed_never_panics(chunks: &[Vec<u8>]) -> Option<ProtoError> {
    let mut s = Server::new();
    for chunk in chunks {
        if let Err(err) = s.handle_input(chunk) {
            assert_eq!(s.state(), ServerState::Closed);
            assert_eq!(s.handle_input(chunk), Err(err.clone()));
            assert_eq!(s.handle_eof(), Err(err.clone()));
            return Some(err);
        }
        while s.poll_event().is_some() {}
        s.poll_transmit();
    }
    s.handle_eof().err()
}

#[test]
fn random_bytes_never_panic_the_server() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut valid = preamble();
    for msg in all_client_msgs() {
        valid.extend(frame(&msg));
    }
    let mut errors = 0;
    for round in 0..2000 {
        // Three flavours: pure noise, noise after a valid preamble, and a valid session
        // with a few bytes flipped; each cut into random chunks.
        let mut wire = match round % 3 {
            0 => {
                let len = rng.below(64) as usize;
                rng.bytes(len)
            }
            1 => {
                let mut w = preamble();
                let len = rng.below(256) as usize;
                w.extend(rng.bytes(len));
                w
            }
            _ => {
                let mut w = valid.clone();
                for _ in 0..=rng.below(4) {
                    let at = rng.below(w.len() as u64) as usize;
                    w[at] = rng.next_u64() as u8;
                }
                w
            }
        };
        if round % 7 == 0 {
            wire.truncate(rng.below(wire.len() as u64 + 1) as usize);
        }
        let mut chunks = Vec::new();
        let mut rest = wire.as_slice();
        while !rest.is_empty() {
            let n = 1 + rng.below(rest.len() as u64) as usize;
            chunks.push(rest[..n].to_vec());
            rest = &rest[n..];
        }
        if feed_never_panics(&chunks).is_some() {
            errors += 1;
        }
    }
    // Noise must overwhelmingly be rejected, not silently accepted.
    assert!(errors > 1500, "only {errors} of 2000 inputs were rejected");
}

/// With a key, the server challenges after hello, takes exactly one auth_response, then
/// welcomes; an auth_response out of turn is a protocol error.
#[test]
fn auth_challenge_then_response_then_welcome() {
    let mut s = server_after_hello();
    let challenge = ServerMsg::AuthChallenge {
        server_nonce: "01".repeat(32),
        server_proof: "cd".repeat(32),
    };
    // Not welcome before the response once challenged.
    s.send(challenge).unwrap();
    assert_eq!(s.state(), ServerState::AwaitingAuthResponse);
    assert!(
        s.send(all_server_msgs()[0].clone()).is_err(),
        "welcome before auth_response"
    );
    let response = ClientMsg::AuthResponse {
        client_proof: "ab".repeat(32),
    };
    s.handle_input(&frame(&response)).unwrap();
    assert_eq!(s.state(), ServerState::AuthResponseReceived);
    assert!(matches!(
        s.poll_event(),
        Some(ServerEvent::Message(ClientMsg::AuthResponse { .. }))
    ));
    s.send(all_server_msgs()[0].clone()).unwrap();
    assert_eq!(s.state(), ServerState::AwaitingDataReady);

    // auth_response without a challenge.
    let mut s = server_after_hello();
    s.send(all_server_msgs()[0].clone()).unwrap();
    assert!(s.handle_input(&frame(&response)).is_err());
}
