//! Everything that can go wrong talking to an iperf3 server, each error naming what netsweep was
//! waiting for or doing, and the fix where there is one.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// An iperf3 test that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum Iperf3Error {
    /// The parameters cannot make an iperf3 test.
    #[error("invalid iperf3 test parameters: {0}")]
    Params(String),
    /// No control connection.
    #[error("cannot connect to the iperf3 server at {addr}: {source}; is `iperf3 -s` running there (its default port is 5201)?")]
    Connect {
        /// The server's address.
        addr: SocketAddr,
        /// The connect error.
        source: io::Error,
    },
    /// The server said nothing (or took nothing) for the whole timeout.
    #[error("timed out after {timeout:?} {waiting_for}: the iperf3 server stalled or the path dropped the traffic")]
    Timeout {
        /// What netsweep was waiting for ("waiting for …", "sending …").
        waiting_for: String,
        /// The timeout that expired.
        timeout: Duration,
    },
    /// The server closed or reset a connection.
    #[error("the iperf3 server closed the connection while netsweep was {doing}: it stopped or crashed (see its log)")]
    Closed {
        /// What netsweep was doing.
        doing: String,
    },
    /// Another IO error.
    #[error("{doing}: {source}")]
    Io {
        /// What netsweep was doing.
        doing: String,
        /// The error.
        source: io::Error,
    },
    /// The server runs another test.
    #[error("the iperf3 server at {0} is busy with another test (ACCESS_DENIED): iperf3 serves one test at a time; retry when it is free, or start another `iperf3 -s -p PORT`")]
    Busy(SocketAddr),
    /// The server reported a failure.
    #[error("the iperf3 server failed the test (SERVER_ERROR: iperf3 error {code}, errno {errno}); its log says why")]
    Server {
        /// iperf3's i_errno.
        code: i32,
        /// The server's errno.
        errno: i32,
    },
    /// The server is shutting down.
    #[error("the iperf3 server is terminating (SERVER_TERMINATE)")]
    Terminated,
    /// A state byte out of place.
    #[error("iperf3 protocol: waiting for {waiting_for}, the server sent state byte {got}")]
    Unexpected {
        /// The state expected.
        waiting_for: String,
        /// The byte received.
        got: i8,
    },
    /// The server's results are not what iperf3 sends.
    #[error("the iperf3 server's results: {0}")]
    BadResults(String),
}

impl Iperf3Error {
    /// Classifies an IO error met while `doing` something (`waiting_for` names the awaited
    /// message when it was a read).
    pub(crate) fn io(e: io::Error, doing: &str, timeout: Duration) -> Iperf3Error {
        use io::ErrorKind::*;
        match e.kind() {
            WouldBlock | TimedOut => Iperf3Error::Timeout {
                waiting_for: doing.to_string(),
                timeout,
            },
            UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => {
                Iperf3Error::Closed {
                    doing: doing.to_string(),
                }
            }
            ConnectionRefused => Iperf3Error::Closed {
                doing: format!("{doing} (the server's port refused it)"),
            },
            _ => Iperf3Error::Io {
                doing: doing.to_string(),
                source: e,
            },
        }
    }
}
