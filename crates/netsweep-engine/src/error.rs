//! Errors of a run or a server session, worded for the user.

use std::io;

/// Why a run or session stopped.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The control connection could not be opened.
    #[error("cannot reach the netsweep server at {addr}: {source}; is `netsweep serve` running there, and is the port open?")]
    Connect {
        /// The address tried.
        addr: String,
        /// Why it failed.
        source: io::Error,
    },
    /// The peer broke the protocol or speaks another version.
    #[error("{0}")]
    Protocol(#[from] netsweep_proto::ProtoError),
    /// The peer did not answer in time.
    #[error("the peer did not answer within {secs:.1} s while {during}; it may have died or the path may be down (raise --timeout if it is just slow)")]
    Timeout {
        /// How long it waited, seconds.
        secs: f64,
        /// What it was waiting for.
        during: String,
    },
    /// The peer closed the control connection.
    #[error("the peer closed the control connection while {during}")]
    Closed {
        /// What was under way.
        during: String,
    },
    /// The server refused the session.
    #[error("the server refused the run: {0}")]
    Refused(String),
    /// This side refused the peer: it could not prove it holds the `--auth-key`.
    #[error("{0}")]
    Auth(String),
    /// The server is serving as many runs as it may (its `--max-sessions`, or `--once`); the
    /// message says which and what to do.
    #[error("the server is busy: {0}")]
    Busy(String),
    /// An I/O error on the data path or control connection.
    #[error("{during}: {source}")]
    Io {
        /// What was under way.
        during: String,
        /// The error.
        source: io::Error,
    },
    /// A background flow (`--background`) failed; the message names it and why.
    #[error("{0}")]
    Background(String),
    /// A peer tool (an iperf3 server) could not run a trial; the message names it and why.
    #[error("{0}")]
    PeerTool(String),
    /// The run's results can no longer be written anywhere (the CLI's sink said so).
    #[error("{0}")]
    Output(String),
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
