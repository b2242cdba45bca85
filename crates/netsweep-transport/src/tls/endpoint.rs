//! The `tls` endpoint: a TCP socket carrying TLS 1.3 records that rustls seals and opens in
//! this process. A send encrypts what fits the connection's buffer and writes the records
//! out before it returns; a receive reads records until one yields plaintext.

use super::identity::{fingerprint, Identity, SERVER_NAME};
use crate::basic::Conn;
use crate::tcpinfo;
use netsweep_endpoint::{Endpoint, EndpointStats};
use netsweep_proto::messages::{GrantedKnobs, TlsGranted};
use rustls::{ClientConnection, Connection, ServerConnection};
use socket2::Socket;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Plaintext one send may hand rustls before its records go out: four full records.
pub const SEND_BUFFER: usize = 4 * 16_384;

/// One side of a `tls` data path after its handshake.
#[derive(Debug)]
pub struct TlsEndpoint {
    conn: Conn,
    fd: RawFd,
    tls: Connection,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
}

/// Whether the kernel offers TLS records itself (the `tls` upper-layer protocol).
pub fn kernel_tls() -> String {
    match std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp") {
        Ok(s) if s.split_whitespace().any(|u| u == "tls") => {
            "offered by this kernel (tcp_available_ulp lists tls); this build seals records in \
             user space"
                .into()
        }
        Ok(s) => format!(
            "not offered by this kernel (tcp_available_ulp: {}; `modprobe tls` loads it where \
             the kernel was built with CONFIG_TLS)",
            s.trim()
        ),
        Err(e) => format!("unknown (cannot read tcp_available_ulp: {e})"),
    }
}

impl TlsEndpoint {
    /// The client side: the handshake over `conn` (the session cookie already presented),
    /// accepting the certificate the session announced, finished by `deadline`.
    pub fn client(
        conn: Conn,
        config: Arc<rustls::ClientConfig>,
        deadline: Instant,
    ) -> io::Result<Self> {
        let name = rustls::pki_types::ServerName::try_from(SERVER_NAME)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let tls = ClientConnection::new(config, name).map_err(tls_error)?;
        Self::handshake(conn, tls.into(), None, deadline)
    }

    /// The server side: the handshake over an accepted `conn`, presenting `id`, finished by
    /// `deadline`.
    pub fn server(conn: Conn, id: &Identity, deadline: Instant) -> io::Result<Self> {
        let tls = ServerConnection::new(id.config.clone()).map_err(tls_error)?;
        Self::handshake(conn, tls.into(), Some(&id.fingerprint), deadline)
    }

    /// Shakes hands; `presented` is the server's own certificate (a client reports the one
    /// it saw).
    fn handshake(
        mut conn: Conn,
        mut tls: Connection,
        presented: Option<&str>,
        deadline: Instant,
    ) -> io::Result<Self> {
        tls.set_buffer_limit(Some(SEND_BUFFER));
        let mut io: &Socket = &conn.sock;
        while tls.is_handshaking() {
            let left = crate::cookie::left(deadline, "the TLS handshake")?;
            conn.sock.set_read_timeout(Some(left))?;
            conn.sock.set_write_timeout(Some(left))?;
            tls.complete_io(&mut io).map_err(|e| {
                if crate::cookie::is_wait(&e) {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the TLS handshake did not finish in time",
                    )
                } else {
                    e
                }
            })?;
        }
        // The first flight after the handshake (a server's session tickets) goes out now,
        // not inside the first timed send.
        while tls.wants_write() {
            tls.write_tls(&mut io)?;
        }
        conn.sock.set_read_timeout(None)?;
        let suite = tls
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown");
        let kx = tls
            .negotiated_key_exchange_group()
            .map_or("unknown".to_string(), |g| format!("{:?}", g.name()));
        let certificate = match (&tls, presented) {
            (_, Some(own)) => own.to_string(),
            (Connection::Client(c), None) => c
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| fingerprint(c))
                .unwrap_or_default(),
            (Connection::Server(_), None) => String::new(),
        };
        conn.granted.tls = Some(TlsGranted {
            version: tls
                .protocol_version()
                .and_then(|v| v.as_str())
                .unwrap_or("unknown")
                .replace("TLSv1_3", "TLSv1.3"),
            cipher_suite: suite.to_string(),
            key_exchange: kx,
            records: "user space (rustls)".into(),
            kernel_tls: kernel_tls(),
            certificate,
        });
        let fd = conn.sock.as_raw_fd();
        Ok(Self { conn, fd, tls })
    }

    /// Writes every sealed record out (blocking, bounded by the socket's send timeout).
    fn flush(&mut self) -> io::Result<()> {
        let mut io: &Socket = &self.conn.sock;
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut io) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Endpoint for TlsEndpoint {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.tls.writer().write(buf)?;
        self.flush()?;
        Ok(n)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            let mut io: &Socket = &self.conn.sock;
            if self.tls.read_tls(&mut io)? == 0 {
                // The peer closed its TCP side; no plaintext is left.
                return Ok(0);
            }
            let state = self.tls.process_new_packets().map_err(tls_error)?;
            if state.tls_bytes_to_write() > 0 {
                // Alerts and key updates the records asked for.
                self.flush()?;
            }
        }
    }

    fn is_datagram(&self) -> bool {
        false
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.conn.sock.set_read_timeout(timeout)
    }

    fn granted(&self) -> GrantedKnobs {
        self.conn.granted.clone()
    }

    fn stats(&mut self) -> EndpointStats {
        let mut s = EndpointStats::default();
        tcpinfo::read(self.fd, &mut s);
        s
    }

    fn socket_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }
}
