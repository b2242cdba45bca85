//! From a connected socket to the session's api: [`wrap`] picks the endpoint of an api for
//! one side, and [`listener`] wraps every connection a socket listener accepts.

use crate::basic::{BasicEndpoint, Conn, ConnListener};
use crate::gso::GsoEndpoint;
use crate::mmsg::MmsgEndpoint;
use crate::sendfile::SendfileEndpoint;
use crate::splice::SpliceEndpoint;
use crate::uring::UringEndpoint;
use crate::zerocopy::ZerocopyEndpoint;
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_model::spec::Api;
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs};
use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::time::Duration;

/// Which end an endpoint serves: some apis act on one side only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client, which connects (and is the sender of a stream).
    Client,
    /// The server, which accepts (and is the receiver of a stream).
    Server,
}

/// Wraps a connected socket in the endpoint of `api`.
pub fn wrap(conn: Conn, api: Api, side: Side) -> io::Result<Box<dyn Endpoint>> {
    Ok(match (api, side) {
        (Api::Basic, _) => Box::new(BasicEndpoint::new(conn)),
        (Api::Mmsg, _) => Box::new(MmsgEndpoint::new(conn)),
        (Api::Zerocopy, _) => Box::new(ZerocopyEndpoint::new(conn)?),
        (Api::Uring, _) => Box::new(UringEndpoint::new(conn)?),
        (Api::Gso, _) => Box::new(GsoEndpoint::new(conn)?),
        (Api::Sendfile, Side::Client) => Box::new(SendfileEndpoint::new(conn)),
        (Api::Splice, Side::Server) => Box::new(SpliceEndpoint::new(conn)),
        (Api::Sendfile, Side::Server) => {
            let mut conn = conn;
            conn.granted
                .notes
                .push("sendfile acts on the client's sends; this side uses send(2)".into());
            Box::new(BasicEndpoint::new(conn))
        }
        (Api::Splice, Side::Client) => {
            let mut conn = conn;
            conn.granted.notes.push(
                "splice acts on the server's (receiver's) side; this side uses send(2)".into(),
            );
            Box::new(BasicEndpoint::new(conn))
        }
        // DATAGRAM frames are QUIC's: its descriptor makes those endpoints itself, and no
        // socket transport lists the api (the registry refuses it before a wrap).
        (Api::Datagram, _) => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "--api datagram is QUIC's DATAGRAM frames: use -t quic",
            ))
        }
    })
}

/// The server's data listener of a socket transport: every accepted connection is wrapped
/// in `api`.
pub fn listener(inner: Box<dyn ConnListener>, api: Api) -> Box<dyn DataListener> {
    Box::new(ApiListener { inner, api })
}

/// A socket listener whose accepted connection is wrapped in the session's api.
#[derive(Debug)]
struct ApiListener {
    inner: Box<dyn ConnListener>,
    api: Api,
}

impl DataListener for ApiListener {
    fn endpoint(&self) -> DataEndpoint {
        self.inner.endpoint()
    }
    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        wrap(self.inner.accept(cookie, timeout)?, self.api, Side::Server)
    }
    fn prepare_crr(&mut self, client: IpAddr, slice: Duration) -> io::Result<GrantedKnobs> {
        self.inner.prepare_crr(client, slice)
    }
    #[inline]
    fn accept_crr(&mut self) -> io::Result<Option<OwnedFd>> {
        self.inner.accept_crr()
    }
}
