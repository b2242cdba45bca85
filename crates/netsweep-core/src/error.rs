//! Errors of a run or a server session, worded for the user.

use std::io;

/// Why a run or session stopped.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The control connection could not be opened.
    #[error("cannot reach the netsweep server at {addr}: {source}; is `netsweep serve` running there, and is the port open?")]
    Connect { addr: String, source: io::Error },
    /// The peer broke the protocol or speaks another version.
    #[error("{0}")]
    Protocol(#[from] netsweep_proto::ProtoError),
    /// The peer did not answer in time.
    #[error("the peer did not answer within {secs:.1} s while {during}; it may have died or the path may be down (raise --timeout if it is just slow)")]
    Timeout { secs: f64, during: String },
    /// The peer closed the control connection.
    #[error("the peer closed the control connection while {during}")]
    Closed { during: String },
    /// The server refused the session.
    #[error("the server refused the run: {0}")]
    Refused(String),
    /// The server is serving someone else.
    #[error("the server is busy with another run: {0}; try again when it is done")]
    Busy(String),
    /// An I/O error on the data path or control connection.
    #[error("{during}: {source}")]
    Io { during: String, source: io::Error },
    /// The user interrupted the run.
    #[error("interrupted")]
    Interrupted,
}

impl NetError {
    /// Wraps an I/O error with what was being done.
    pub fn io(during: impl Into<String>, source: io::Error) -> Self {
        NetError::Io {
            during: during.into(),
            source,
        }
    }
}
