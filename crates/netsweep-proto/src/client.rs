//! The client's side of a control session as a sans-IO state machine.
//!
//! The client drives: it sends a message with [`Client::send`] and the machine checks that
//! the server's answer is the one the session allows next.

use std::collections::VecDeque;
use std::fmt;

use crate::codec::{decode_message, encode_message};
use crate::error::ProtoError;
use crate::frame::FrameDecoder;
use crate::messages::{ClientMsg, ServerMsg};
use crate::preamble::{
    decode_server_preamble, encode_client_preamble, PreambleBuf, VersionMismatch, VersionRange,
    SERVER_PREAMBLE_LEN,
};

/// Where a client session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// The preamble is queued; waiting for the server's reply.
    AwaitingPreamble,
    /// A version is agreed; `hello` may be sent.
    Negotiated,
    /// `hello` sent; waiting for `welcome`, `busy` or `error`.
    AwaitingWelcome,
    /// Welcomed; `data_ready` may be sent once the data endpoint is connected.
    Welcomed,
    /// `data_ready` sent; waiting for `data_bound`.
    AwaitingDataBound,
    /// Between trials: `trial_start` or `bye` may be sent.
    Idle,
    /// `trial_start` sent; waiting for `ready`.
    AwaitingReady {
        /// The trial started.
        trial: u64,
    },
    /// The server is armed; the trial runs until the client sends `trial_end`.
    InTrial {
        /// The trial running.
        trial: u64,
    },
    /// `trial_end` sent; waiting for `trial_report`.
    AwaitingReport {
        /// The trial ended.
        trial: u64,
    },
    /// `bye` sent; waiting for the server's `bye`.
    ByeSent,
    /// Ended, cleanly or by an error ([`Client::error`] tells which).
    Closed,
}

impl fmt::Display for ClientState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientState::AwaitingPreamble => f.write_str("waiting for the server's preamble"),
            ClientState::Negotiated => f.write_str("about to send hello"),
            ClientState::AwaitingWelcome => f.write_str("waiting for the reply to hello"),
            ClientState::Welcomed => f.write_str("about to send data_ready"),
            ClientState::AwaitingDataBound => f.write_str("waiting for data_bound"),
            ClientState::Idle => f.write_str("between trials"),
            ClientState::AwaitingReady { trial } => {
                write!(f, "waiting for ready for trial {trial}")
            }
            ClientState::InTrial { trial } => write!(f, "running trial {trial}"),
            ClientState::AwaitingReport { trial } => {
                write!(f, "waiting for trial_report for trial {trial}")
            }
            ClientState::ByeSent => f.write_str("waiting for bye"),
            ClientState::Closed => f.write_str("closed"),
        }
    }
}

/// Something the client's caller must act on.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "a few events per trial, never inside a timed loop; boxing would only burden callers"
)]
pub enum ClientEvent {
    /// The server accepted the preamble.
    Negotiated {
        /// The version the session uses.
        version: u16,
        /// What the server speaks.
        server: VersionRange,
    },
    /// A message from the server, already checked to be allowed here.
    ///
    /// `busy`, `error` and `bye` close the session; the caller reports `message` to the user.
    Message(ServerMsg),
}

/// The client's control-session state machine. See the crate docs for how to drive it.
#[derive(Debug)]
pub struct Client {
    state: ClientState,
    versions: VersionRange,
    version: Option<u16>,
    preamble: PreambleBuf<SERVER_PREAMBLE_LEN>,
    frames: FrameDecoder,
    out: Vec<u8>,
    events: VecDeque<ClientEvent>,
    error: Option<ProtoError>,
}

impl Default for Client {
    fn default() -> Self {
        Self::new()
    }
}

impl Client {
    /// A client speaking [`VersionRange::SUPPORTED`], with its preamble queued.
    pub fn new() -> Self {
        Self::with_versions(VersionRange::SUPPORTED)
    }

    /// A client offering `versions` (tests, and builds that speak several versions).
    pub fn with_versions(versions: VersionRange) -> Self {
        Client {
            state: ClientState::AwaitingPreamble,
            versions,
            version: None,
            preamble: PreambleBuf::default(),
            frames: FrameDecoder::new(),
            out: encode_client_preamble(versions).to_vec(),
            events: VecDeque::new(),
            error: None,
        }
    }

    /// Where the session stands.
    pub fn state(&self) -> ClientState {
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
        self.state == ClientState::Closed
    }

    /// Bytes to write to the server, if any are queued.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.out.is_empty()).then(|| std::mem::take(&mut self.out))
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Queues `msg` for the server.
    ///
    /// Sending out of order is [`ProtoError::InvalidSend`] and leaves the session as it was.
    pub fn send(&mut self, msg: ClientMsg) -> Result<(), ProtoError> {
        self.check_open()?;
        let next = match (&msg, self.state) {
            (ClientMsg::Hello { .. }, ClientState::Negotiated) => ClientState::AwaitingWelcome,
            (ClientMsg::DataReady {}, ClientState::Welcomed) => ClientState::AwaitingDataBound,
            (ClientMsg::TrialStart { trial, .. }, ClientState::Idle) => {
                ClientState::AwaitingReady { trial: *trial }
            }
            (ClientMsg::TrialEnd { trial, .. }, ClientState::InTrial { trial: running })
                if *trial == running =>
            {
                ClientState::AwaitingReport { trial: *trial }
            }
            (
                ClientMsg::Bye {},
                ClientState::Negotiated
                | ClientState::Welcomed
                | ClientState::Idle
                | ClientState::InTrial { .. },
            ) => ClientState::ByeSent,
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

    /// Feeds bytes received from the server. Events it produces are queued even when a later
    /// byte in the same chunk is an error.
    pub fn handle_input(&mut self, data: &[u8]) -> Result<(), ProtoError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        if self.is_closed() {
            // Ended cleanly; whatever the server still sends does not matter.
            return Ok(());
        }
        let result = self.process(data);
        if let Err(err) = &result {
            self.fail(err.clone());
        }
        result
    }

    /// To call when the server closed the connection (read returned 0).
    pub fn handle_eof(&mut self) -> Result<(), ProtoError> {
        if let Some(err) = &self.error {
            return Err(err.clone());
        }
        let err = match self.state {
            ClientState::Closed | ClientState::ByeSent => {
                self.state = ClientState::Closed;
                return Ok(());
            }
            ClientState::AwaitingPreamble => ProtoError::TruncatedPreamble {
                got: self.preamble.len(),
            },
            state => match self.frames.finish() {
                Err(err) => err,
                Ok(()) => ProtoError::ConnectionClosed {
                    during: state.to_string(),
                },
            },
        };
        self.fail(err.clone());
        Err(err)
    }

    fn check_open(&self) -> Result<(), ProtoError> {
        match (&self.error, self.state) {
            (Some(err), _) => Err(err.clone()),
            (None, ClientState::Closed) => Err(ProtoError::SessionClosed),
            _ => Ok(()),
        }
    }

    fn fail(&mut self, err: ProtoError) {
        self.state = ClientState::Closed;
        self.error = Some(err);
    }

    fn process(&mut self, mut data: &[u8]) -> Result<(), ProtoError> {
        if self.state == ClientState::AwaitingPreamble {
            let used = self.preamble.fill(data)?;
            data = &data[used..];
            let Some(bytes) = self.preamble.complete() else {
                return Ok(());
            };
            let reply = decode_server_preamble(bytes)?;
            if !self.versions.contains(reply.chosen) || !reply.server.contains(reply.chosen) {
                return Err(VersionMismatch {
                    client: self.versions,
                    server: reply.server,
                }
                .into());
            }
            self.version = Some(reply.chosen);
            self.state = ClientState::Negotiated;
            self.events.push_back(ClientEvent::Negotiated {
                version: reply.chosen,
                server: reply.server,
            });
        }
        self.frames.push(data)?;
        while let Some(body) = self.frames.pop() {
            if self.is_closed() {
                break;
            }
            let msg: ServerMsg = decode_message(&body)?;
            self.on_message(msg)?;
        }
        Ok(())
    }

    fn on_message(&mut self, msg: ServerMsg) -> Result<(), ProtoError> {
        use ClientState as S;
        let next = match (&msg, self.state) {
            (ServerMsg::Welcome { .. }, S::AwaitingWelcome) => S::Welcomed,
            (ServerMsg::Busy { .. }, S::AwaitingWelcome) => S::Closed,
            (ServerMsg::DataBound { .. }, S::AwaitingDataBound) => S::Idle,
            (ServerMsg::Ready { trial }, S::AwaitingReady { trial: t }) if *trial == t => {
                S::InTrial { trial: t }
            }
            (ServerMsg::TrialReport { trial, .. }, S::AwaitingReport { trial: t })
                if *trial == t =>
            {
                S::Idle
            }
            (ServerMsg::Bye {}, S::Idle | S::ByeSent) => S::Closed,
            // The server may give up at any point, saying why.
            (ServerMsg::Error { .. }, _) => S::Closed,
            (_, state) => {
                return Err(ProtoError::UnexpectedMessage {
                    expected: expected_from_server(state),
                    got: msg.describe(),
                })
            }
        };
        self.state = next;
        self.events.push_back(ClientEvent::Message(msg));
        Ok(())
    }
}

/// What the server may send in `state`, for error messages.
fn expected_from_server(state: ClientState) -> String {
    match state {
        ClientState::AwaitingWelcome => "welcome, busy or error in reply to hello".into(),
        ClientState::AwaitingDataBound => "data_bound in reply to data_ready".into(),
        ClientState::AwaitingReady { trial } => format!("ready for trial {trial}"),
        ClientState::AwaitingReport { trial } => format!("trial_report for trial {trial}"),
        ClientState::Idle => "nothing (or bye) between trials".into(),
        ClientState::ByeSent => "bye in reply to bye".into(),
        ClientState::Negotiated => "nothing before hello".into(),
        ClientState::Welcomed => "nothing before data_ready".into(),
        ClientState::InTrial { trial } => format!("nothing before trial_end for trial {trial}"),
        ClientState::AwaitingPreamble | ClientState::Closed => "nothing".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::tests::{all_client_msgs, all_server_msgs};
    use crate::messages::{DataEndpoint, HostInfo, SessionSetup, SideCounters, TrialSpec};
    use crate::preamble::{encode_server_preamble, ServerReply, MAGIC};
    use crate::server::{Server, ServerEvent, ServerState};
    use crate::test_util::pump;

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
                version: 1,
                server: VersionRange::new(1, 1)
            }]
        );
        assert_eq!(
            se,
            vec![ServerEvent::Negotiated {
                version: 1,
                client: VersionRange::new(1, 1)
            }]
        );
        assert_eq!((c.version(), s.version()), (Some(1), Some(1)));
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
                client: HostInfo::default()
            })
            .map_err(|e| e.to_string()),
            Err(
                "cannot send hello while between trials; this is a bug in netsweep, please \
                 report it"
                    .into()
            )
        );
    }
}
