//! The control connection: the sans-IO protocol machines of `netsweep-proto` driven over a
//! blocking TCP stream, with a deadline on every wait for the peer.

use crate::error::NetError;
use netsweep_proto::text::printable;
use netsweep_proto::{Client, ClientEvent, ClientMsg, Server, ServerEvent, ServerMsg};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Reads from `stream` until `until` yields something or the deadline passes.
fn pump<T>(
    stream: &mut TcpStream,
    timeout: Duration,
    during: &str,
    mut feed: impl FnMut(Option<&[u8]>) -> Result<Option<T>, NetError>,
) -> Result<T, NetError> {
    if let Some(v) = feed(Some(&[]))? {
        return Ok(v);
    }
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(NetError::Timeout {
                secs: timeout.as_secs_f64(),
                during: during.into(),
            });
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| NetError::io("control connection", e))?;
        match stream.read(&mut buf) {
            Ok(0) => {
                feed(None)?;
                return Err(NetError::Closed {
                    during: during.into(),
                });
            }
            Ok(n) => {
                if let Some(v) = feed(Some(&buf[..n]))? {
                    return Ok(v);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(NetError::io(format!("control connection ({during})"), e)),
        }
    }
}

fn flush(stream: &mut TcpStream, out: impl Iterator<Item = Vec<u8>>) -> Result<(), NetError> {
    for chunk in out {
        stream
            .write_all(&chunk)
            .map_err(|e| NetError::io("writing to the control connection", e))?;
    }
    Ok(())
}

/// Puts a control connection in its run's class: the TOS byte (IPV6_TCLASS on IPv6) and the
/// SO_PRIORITY that side's data sockets ask. A path that queues by class (strict priority by
/// DSCP, htb by priority) then carries the run's control messages where it carries the run;
/// left in the default class they wait behind any higher class that stays busy, the run's
/// own background stream included, and a seed-002 run timed out so ("the peer did not answer
/// within 5.0 s while waiting for the server to arm the trial"). Best effort: the data
/// sockets' grants are what the results record.
pub fn join_class(stream: &TcpStream, tos: Option<u8>, priority: Option<u32>) {
    let s = socket2::SockRef::from(stream);
    if let Some(t) = tos {
        let v6 = stream.local_addr().is_ok_and(|a| a.is_ipv6());
        let _ = if v6 {
            s.set_tclass_v6(t.into())
        } else {
            s.set_tos_v4(t.into())
        };
    }
    if let Some(p) = priority {
        let _ = s.set_priority(p);
    }
}

/// The client's end of a control connection.
#[derive(Debug)]
pub struct ClientControl {
    stream: TcpStream,
    machine: Client,
    timeout: Duration,
    version: u16,
}

/// A server that closes (or resets) the connection before any byte of the protocol is one
/// that did not want this client: said with the likely reasons.
fn closed_before_negotiation(e: NetError) -> NetError {
    let reset = matches!(&e, NetError::Io { source, .. }
        if matches!(source.kind(), std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted));
    if reset || matches!(e, NetError::Closed { .. }) {
        NetError::Refused(format!(
            "{e} — the server closed the connection before saying a word: it may not serve \
             this client's address (`netsweep serve --allow-from`), or it is not a netsweep \
             server"
        ))
    } else {
        e
    }
}

impl ClientControl {
    /// Connects and negotiates the protocol version.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, NetError> {
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|source| NetError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        stream.set_nodelay(true).ok();
        stream.set_write_timeout(Some(timeout)).ok();
        let mut c = Self {
            stream,
            machine: Client::new(),
            timeout,
            version: 0,
        };
        c.flush()?;
        let machine = &mut c.machine;
        let version = pump(
            &mut c.stream,
            timeout,
            "negotiating the protocol version",
            |data| {
                match data {
                    Some(d) => machine.handle_input(d)?,
                    None => machine.handle_eof()?,
                }
                match machine.poll_event() {
                    Some(ClientEvent::Negotiated { version, .. }) => Ok(Some(version)),
                    Some(ClientEvent::Message(_)) => Ok(None),
                    None => Ok(None),
                }
            },
        )
        .map_err(closed_before_negotiation)?;
        c.version = version;
        Ok(c)
    }

    /// The protocol version agreed with the server.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The stream underneath (its peer address tells where the data endpoint lives).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    fn flush(&mut self) -> Result<(), NetError> {
        let m = &mut self.machine;
        flush(&mut self.stream, std::iter::from_fn(|| m.poll_transmit()))
    }

    /// Sends one message.
    pub fn send(&mut self, msg: ClientMsg) -> Result<(), NetError> {
        self.machine.send(msg)?;
        self.flush()
    }

    /// Waits for the next message from the server, up to `timeout` (the default when `None`).
    pub fn recv(&mut self, during: &str, timeout: Option<Duration>) -> Result<ServerMsg, NetError> {
        let machine = &mut self.machine;
        let msg = pump(
            &mut self.stream,
            timeout.unwrap_or(self.timeout),
            during,
            |data| {
                match data {
                    Some(d) => machine.handle_input(d)?,
                    None => machine.handle_eof()?,
                }
                loop {
                    match machine.poll_event() {
                        Some(ClientEvent::Message(m)) => return Ok(Some(m)),
                        Some(ClientEvent::Negotiated { .. }) => continue,
                        None => return Ok(None),
                    }
                }
            },
        )?;
        Ok(msg)
    }

    /// Sends `msg` and waits for the answer.
    pub fn request(
        &mut self,
        msg: ClientMsg,
        during: &str,
        timeout: Option<Duration>,
    ) -> Result<ServerMsg, NetError> {
        self.send(msg)?;
        match self.recv(during, timeout)? {
            // The server's words, made safe for a terminal and a log before they go further.
            ServerMsg::Error { message } => Err(NetError::Refused(printable(&message))),
            ServerMsg::Busy { message } => Err(NetError::Busy(printable(&message))),
            m => Ok(m),
        }
    }
}

/// The server's end of a control connection.
#[derive(Debug)]
pub struct ServerControl {
    stream: TcpStream,
    machine: Server,
}

impl ServerControl {
    /// Negotiates the protocol version with a freshly accepted client.
    pub fn accept(stream: TcpStream, timeout: Duration) -> Result<Self, NetError> {
        stream.set_nodelay(true).ok();
        stream.set_write_timeout(Some(timeout)).ok();
        let mut s = Self {
            stream,
            machine: Server::new(),
        };
        let machine = &mut s.machine;
        let result = pump(
            &mut s.stream,
            timeout,
            "waiting for the client's preamble",
            |data| {
                match data {
                    Some(d) => machine.handle_input(d)?,
                    None => machine.handle_eof()?,
                }
                match machine.poll_event() {
                    Some(ServerEvent::Negotiated { .. }) => Ok(Some(())),
                    _ => Ok(None),
                }
            },
        );
        // Even on a mismatch the machine queued a reply that names both ranges: send it.
        let _ = s.flush();
        result?;
        Ok(s)
    }

    fn flush(&mut self) -> Result<(), NetError> {
        let m = &mut self.machine;
        flush(&mut self.stream, std::iter::from_fn(|| m.poll_transmit()))
    }

    /// The stream underneath.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Sends one message.
    pub fn send(&mut self, msg: ServerMsg) -> Result<(), NetError> {
        self.machine.send(msg)?;
        self.flush()
    }

    /// Waits up to `timeout` for the next message from the client.
    pub fn recv(&mut self, during: &str, timeout: Duration) -> Result<ClientMsg, NetError> {
        let machine = &mut self.machine;
        let r = pump(&mut self.stream, timeout, during, |data| {
            match data {
                Some(d) => machine.handle_input(d)?,
                None => machine.handle_eof()?,
            }
            loop {
                match machine.poll_event() {
                    Some(ServerEvent::Message(m)) => return Ok(Some(m)),
                    Some(ServerEvent::Negotiated { .. }) => continue,
                    None => return Ok(None),
                }
            }
        });
        // A `bye` from the client makes the machine queue its own.
        let _ = self.flush();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The class lands on a real socket: read back with getsockopt.
    #[test]
    fn a_control_connection_joins_its_runs_class() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let s = socket2::SockRef::from(&stream);
        assert_eq!(s.tos_v4().unwrap(), 0);
        join_class(&stream, Some(0x40), Some(2));
        assert_eq!(s.tos_v4().unwrap(), 0x40);
        assert_eq!(s.priority().unwrap(), 2);
        // Nothing asked, nothing changed.
        join_class(&stream, None, None);
        assert_eq!(s.tos_v4().unwrap(), 0x40);
    }
}
