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
    decode_server_preamble, encode_client_preamble, PreambleBuf, SERVER_PREAMBLE_LEN,
};
use crate::version::{VersionMismatch, VersionRange};

/// Where a client session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// The preamble is queued; waiting for the server's reply.
    AwaitingPreamble,
    /// A version is agreed; `hello` may be sent.
    Negotiated,
    /// `hello` sent; waiting for `welcome`, `busy`, `error` or `auth_challenge`.
    AwaitingWelcome,
    /// The server asked for authentication; `auth_response` may be sent.
    Challenged,
    /// `auth_response` sent; waiting for `welcome`, `busy` or `error`.
    AuthSent,
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
            ClientState::Challenged => f.write_str("about to answer the server's challenge"),
            ClientState::AuthSent => f.write_str("waiting for the reply to auth_response"),
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
            (ClientMsg::AuthResponse { .. }, ClientState::Challenged) => ClientState::AuthSent,
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
            (ServerMsg::AuthChallenge { .. }, S::AwaitingWelcome) => S::Challenged,
            (ServerMsg::Welcome { .. }, S::AwaitingWelcome | S::AuthSent) => S::Welcomed,
            (ServerMsg::Busy { .. }, S::AwaitingWelcome | S::AuthSent) => S::Closed,
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
        ClientState::AwaitingWelcome => {
            "welcome, busy, error or auth_challenge in reply to hello".into()
        }
        ClientState::AuthSent => "welcome, busy or error in reply to auth_response".into(),
        ClientState::Challenged => "nothing before auth_response".into(),
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
mod tests;
