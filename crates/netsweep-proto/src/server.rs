//! The server's side of a control session as a sans-IO state machine.
//!
//! The server faces untrusted input: any byte sequence gives either events or a
//! [`ProtoError`], never a panic, and frame lengths are capped before allocation.

use std::collections::VecDeque;
use std::fmt;

use crate::codec::{decode_message, encode_message};
use crate::error::ProtoError;
use crate::frame::FrameDecoder;
use crate::messages::{ClientMsg, ServerMsg};
use crate::preamble::{
    decode_client_preamble, encode_server_preamble, negotiate, PreambleBuf, ServerReply,
    VersionRange, CLIENT_PREAMBLE_LEN,
};

/// Where a server session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Waiting for the client's preamble.
    AwaitingPreamble,
    /// Negotiated; waiting for `hello`.
    AwaitingHello,
    /// `hello` received; the caller must send `welcome`, `busy` or `error`.
    HelloReceived,
    /// `welcome` sent; waiting for `data_ready`.
    AwaitingDataReady,
    /// `data_ready` received; the caller must bind the data endpoint and send `data_bound`.
    DataReadyReceived,
    /// Between trials: waiting for `trial_start` or `bye`.
    Idle,
    /// `trial_start` received; the caller must arm and send `ready`.
    TrialStartReceived {
        /// The trial to arm.
        trial: u64,
    },
    /// `ready` sent; the trial runs until the client's `trial_end`.
    InTrial {
        /// The trial running.
        trial: u64,
    },
    /// `trial_end` received; the caller must send `trial_report`.
    TrialEndReceived {
        /// The trial to report.
        trial: u64,
    },
    /// Ended, cleanly or by an error ([`Server::error`] tells which).
    Closed,
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerState::AwaitingPreamble => f.write_str("waiting for the client's preamble"),
            ServerState::AwaitingHello => f.write_str("waiting for hello"),
            ServerState::HelloReceived => f.write_str("answering hello"),
            ServerState::AwaitingDataReady => f.write_str("waiting for data_ready"),
            ServerState::DataReadyReceived => f.write_str("binding the data endpoint"),
            ServerState::Idle => f.write_str("waiting for trial_start or bye"),
            ServerState::TrialStartReceived { trial } => write!(f, "arming trial {trial}"),
            ServerState::InTrial { trial } => {
                write!(f, "waiting for trial_end for trial {trial}")
            }
            ServerState::TrialEndReceived { trial } => write!(f, "reporting trial {trial}"),
            ServerState::Closed => f.write_str("closed"),
        }
    }
}

/// Something the server's caller must act on.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "a few events per trial, never inside a timed loop; boxing would only burden callers"
)]
pub enum ServerEvent {
    /// The client's preamble was accepted (the reply is queued).
    Negotiated {
        /// The version the session uses.
        version: u16,
        /// What the client speaks.
        client: VersionRange,
    },
    /// A message from the client, already checked to be allowed here.
    ///
    /// After `bye` the machine has queued its own `bye` and is closed.
    Message(ClientMsg),
}

/// The server's control-session state machine. See the crate docs for how to drive it.
#[derive(Debug)]
pub struct Server {
    state: ServerState,
    versions: VersionRange,
    version: Option<u16>,
    preamble: PreambleBuf<CLIENT_PREAMBLE_LEN>,
    frames: FrameDecoder,
    out: Vec<u8>,
    events: VecDeque<ServerEvent>,
    error: Option<ProtoError>,
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

impl Server {
    /// A server speaking [`VersionRange::SUPPORTED`], waiting for a preamble.
    pub fn new() -> Self {
        Self::with_versions(VersionRange::SUPPORTED)
    }

    /// A server accepting `versions` (tests, and builds that speak several versions).
    pub fn with_versions(versions: VersionRange) -> Self {
        Server {
            state: ServerState::AwaitingPreamble,
            versions,
            version: None,
            preamble: PreambleBuf::default(),
            frames: FrameDecoder::new(),
            out: Vec::new(),
            events: VecDeque::new(),
            error: None,
        }
    }

    /// Where the session stands.
    pub fn state(&self) -> ServerState {
        self.state
    }

    /// The negotiated version, once known.
    pub fn version(&self) -> Option<u16> {
        self.version
    }

    /// The error that closed the session, if one did.
    pub fn error(&self) -> Option<&ProtoError> {
        self.error.as_ref()
    }

    /// Whether the session ended (cleanly or not).
    pub fn is_closed(&self) -> bool {
        self.state == ServerState::Closed
    }

    /// Bytes to write to the client, if any are queued. Still drains after an error, so a
    /// rejected client gets the preamble reply that names both version ranges.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.out.is_empty()).then(|| std::mem::take(&mut self.out))
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Queues `msg` for the client: the reply the current state owes, `error` at any point
    /// after negotiation, or `bye` between trials. `busy`, `error` and `bye` close the session.
    ///
    /// Sending out of order is [`ProtoError::InvalidSend`] and leaves the session as it was.
    pub fn send(&mut self, msg: ServerMsg) -> Result<(), ProtoError> {
        use ServerState as S;
        match (&self.error, self.state) {
            (Some(err), _) => return Err(err.clone()),
            (None, S::Closed) => return Err(ProtoError::SessionClosed),
            _ => {}
        }
        let next = match (&msg, self.state) {
            (ServerMsg::Welcome { .. }, S::HelloReceived) => S::AwaitingDataReady,
            (ServerMsg::Busy { .. }, S::HelloReceived) => S::Closed,
            (ServerMsg::DataBound { .. }, S::DataReadyReceived) => S::Idle,
            (ServerMsg::Ready { trial }, S::TrialStartReceived { trial: t }) if *trial == t => {
                S::InTrial { trial: t }
            }
            (ServerMsg::TrialReport { trial, .. }, S::TrialEndReceived { trial: t })
                if *trial == t =>
            {
                S::Idle
            }
            (ServerMsg::Bye {}, S::Idle) => S::Closed,
            (ServerMsg::Error { .. }, state) if state != S::AwaitingPreamble => S::Closed,
            _ => {
                return Err(ProtoError::InvalidSend {
                    state: self.state.to_string(),
                    msg: msg.describe(),
                })
            }
        };
        self.out.extend(encode_message(&msg)?);
        self.state = next;
        Ok(())
    }

    /// Feeds bytes received from the client. Events it produces are queued even when a later
    /// byte in the same chunk is an error.
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), ProtoError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        if self.is_closed() {
            // Ended cleanly; whatever the client still sends does not matter.
            return Ok(());
        }
        let result = self.process(data);
        if let Err(err) = &result {
            self.state = ServerState::Closed;
            self.error = Some(err.clone());
        }
        result
    }

    /// To call when the client closed the connection (read returned 0).
    pub fn handle_eof(&mut self) -> Result<(), ProtoError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        let err = match self.state {
            ServerState::Closed => return Ok(()),
            ServerState::AwaitingPreamble => ProtoError::TruncatedPreamble {
                got: self.preamble.len(),
            },
            state => match self.frames.finish() {
                Err(err) => err,
                Ok(()) => ProtoError::ConnectionClosed {
                    during: state.to_string(),
                },
            },
        };
        self.state = ServerState::Closed;
        self.error = Some(err.clone());
        Err(err)
    }

    fn process(&mut self, mut data: &[u8]) -> Result<(), ProtoError> {
        if self.state == ServerState::AwaitingPreamble {
            data = self.take_preamble(data)?;
            if self.state == ServerState::AwaitingPreamble {
                return Ok(());
            }
        }
        self.frames.push(data)?;
        while let Some(body) = self.frames.pop() {
            if self.is_closed() {
                break;
            }
            let msg: ClientMsg = decode_message(&body)?;
            self.on_message(msg)?;
        }
        Ok(())
    }

    /// Consumes preamble bytes; on a whole preamble, negotiates and queues the reply.
    /// Returns the bytes after the preamble.
    fn take_preamble<'a>(&mut self, data: &'a [u8]) -> Result<&'a [u8], ProtoError> {
        let used = match self.preamble.fill(data) {
            Ok(used) => used,
            Err(err) => {
                self.reply(0);
                return Err(err);
            }
        };
        let Some(bytes) = self.preamble.complete() else {
            return Ok(&data[used..]);
        };
        let client = decode_client_preamble(bytes)?;
        match negotiate(client, self.versions) {
            Ok(version) => {
                self.reply(version);
                self.version = Some(version);
                self.state = ServerState::AwaitingHello;
                self.events
                    .push_back(ServerEvent::Negotiated { version, client });
                Ok(&data[used..])
            }
            Err(mismatch) => {
                self.reply(0);
                Err(mismatch.into())
            }
        }
    }

    fn reply(&mut self, chosen: u16) {
        self.out.extend(encode_server_preamble(ServerReply {
            chosen,
            server: self.versions,
        }));
    }

    fn on_message(&mut self, msg: ClientMsg) -> Result<(), ProtoError> {
        use ServerState as S;
        let next = match (&msg, self.state) {
            (ClientMsg::Hello { .. }, S::AwaitingHello) => S::HelloReceived,
            (ClientMsg::DataReady {}, S::AwaitingDataReady) => S::DataReadyReceived,
            (ClientMsg::TrialStart { trial, .. }, S::Idle) => {
                S::TrialStartReceived { trial: *trial }
            }
            (ClientMsg::TrialEnd { trial, .. }, S::InTrial { trial: t }) if *trial == t => {
                S::TrialEndReceived { trial: t }
            }
            (
                ClientMsg::Bye {},
                S::AwaitingHello | S::AwaitingDataReady | S::Idle | S::InTrial { .. },
            ) => {
                self.out.extend(encode_message(&ServerMsg::Bye {})?);
                S::Closed
            }
            (_, state) => {
                return Err(ProtoError::UnexpectedMessage {
                    expected: expected_from_client(state),
                    got: msg.describe(),
                })
            }
        };
        self.state = next;
        self.events.push_back(ServerEvent::Message(msg));
        Ok(())
    }
}

/// What the client may send in `state`, for error messages.
fn expected_from_client(state: ServerState) -> String {
    match state {
        ServerState::AwaitingHello => "hello or bye".into(),
        ServerState::AwaitingDataReady => "data_ready or bye".into(),
        ServerState::Idle => "trial_start or bye".into(),
        ServerState::InTrial { trial } => format!("trial_end for trial {trial} or bye"),
        ServerState::HelloReceived => "nothing until the server answers hello".into(),
        ServerState::DataReadyReceived => "nothing until the server sends data_bound".into(),
        ServerState::TrialStartReceived { trial } => {
            format!("nothing until the server sends ready for trial {trial}")
        }
        ServerState::TrialEndReceived { trial } => {
            format!("nothing until the server sends trial_report for trial {trial}")
        }
        ServerState::AwaitingPreamble | ServerState::Closed => "nothing".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::tests::{all_client_msgs, all_server_msgs};
    use crate::frame::{encode_frame, MAX_FRAME};
    use crate::messages::{SideCounters, TrialSpec};
    use crate::preamble::{
        decode_server_preamble, encode_client_preamble, VersionMismatch, SERVER_PREAMBLE_LEN,
    };
    use crate::test_util::XorShift;

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
        let mut s = Server::with_versions(VersionRange::new(2, 3));
        let err = s.handle_input(&preamble()).unwrap_err();
        assert_eq!(
            err,
            ProtoError::VersionMismatch(VersionMismatch {
                client: VersionRange::new(1, 1),
                server: VersionRange::new(2, 3)
            })
        );
        assert_eq!(
            reply_of(&mut s),
            ServerReply {
                chosen: 0,
                server: VersionRange::new(2, 3)
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
}
