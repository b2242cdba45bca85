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
    decode_client_preamble, encode_server_preamble, PreambleBuf, ServerReply, CLIENT_PREAMBLE_LEN,
};
use crate::version::{negotiate, VersionRange};

/// Where a server session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Waiting for the client's preamble.
    AwaitingPreamble,
    /// Negotiated; waiting for `hello`.
    AwaitingHello,
    /// `hello` received; the caller must send `welcome`, `busy`, `error` or (holding a key)
    /// `auth_challenge`.
    HelloReceived,
    /// `auth_challenge` sent; waiting for `auth_response`.
    AwaitingAuthResponse,
    /// `auth_response` received; the caller must check it and send `welcome`, `busy` or
    /// `error`.
    AuthResponseReceived,
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
            ServerState::AwaitingAuthResponse => f.write_str("waiting for auth_response"),
            ServerState::AuthResponseReceived => f.write_str("checking auth_response"),
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
            (ServerMsg::AuthChallenge { .. }, S::HelloReceived) => S::AwaitingAuthResponse,
            (ServerMsg::Welcome { .. }, S::HelloReceived | S::AuthResponseReceived) => {
                S::AwaitingDataReady
            }
            (ServerMsg::Busy { .. }, S::HelloReceived | S::AuthResponseReceived) => S::Closed,
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
            (ClientMsg::AuthResponse { .. }, S::AwaitingAuthResponse) => S::AuthResponseReceived,
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
        ServerState::AwaitingAuthResponse => "auth_response".into(),
        ServerState::AuthResponseReceived => {
            "nothing until the server answers auth_response".into()
        }
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
mod tests;
