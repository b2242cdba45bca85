//! The `quic` connection's configuration, in one place for both ends: the TLS 1.3 of the
//! `tls` transport (the process's identity on the server, the pinned fingerprint on the
//! client) under ALPN `netsweep`, quinn's default windows and congestion control (what a
//! user of the stack gets), no idle timeout (every wait of an endpoint has its own deadline),
//! and a server that holds one connection of one stream per session.

use crate::tls::{identity, pin};
use quinn_proto::congestion::{BbrConfig, ControllerFactory, CubicConfig, NewRenoConfig};
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{ClientConfig, EndpointConfig, ServerConfig, TransportConfig, VarInt};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The application protocol a netsweep data path names in its handshake.
pub const ALPN: &[u8] = b"netsweep";
/// Bytes a stream may have in flight toward a receiver (quinn's default: 100 Mbit/s for
/// 100 ms).
pub const STREAM_WINDOW: u32 = 1_250_000;
/// Bytes a sender buffers, unacknowledged data included (quinn's default: 8 streams' worth).
pub const SEND_WINDOW: u64 = 8 * STREAM_WINDOW as u64;
/// The first packets' UDP payload (RFC 9000's minimum, quinn's default).
pub const INITIAL_UDP_PAYLOAD: u16 = 1200;
/// The ceiling path-MTU discovery probes up to (quinn's default: Ethernet's 1500 less IPv6
/// and UDP headers).
pub const MTU_CEILING: u16 = 1452;
/// Connections a server's endpoint keeps in its handshake at once (one session's client,
/// and a second it will refuse).
const MAX_INCOMING: usize = 2;
/// Bytes of a client's first flights a server buffers before its handshake starts.
const INCOMING_BUFFER: u64 = 64 << 10;

/// Bytes of DATAGRAM frames a receiver buffers before it drops the oldest, and a sender
/// before a send waits (`--api datagram`).
pub const DATAGRAM_BUFFER: usize = 1 << 20;

/// The congestion controllers quinn-proto has, by the names `--cc` takes.
pub const CONTROLLERS: &str = "cubic (the default), newreno (or reno) and bbr";

/// quinn-proto's congestion controller named `cc` (cubic when `None`), with its name.
pub fn controller(
    cc: Option<&str>,
) -> Result<(Arc<dyn ControllerFactory + Send + Sync>, &'static str), String> {
    Ok(match cc.unwrap_or("cubic") {
        "cubic" => (Arc::new(CubicConfig::default()), "cubic"),
        "newreno" | "reno" => (Arc::new(NewRenoConfig::default()), "newreno"),
        "bbr" => (Arc::new(BbrConfig::default()), "bbr"),
        other => {
            return Err(format!(
                "quic has no congestion controller {other:?}: quinn-proto's are {CONTROLLERS} \
                 (TCP's are the kernel's; --cc names one of these with -t quic)"
            ))
        }
    })
}

/// The transport parameters both ends use; `streams` is how many streams the peer may
/// open toward this end; `datagrams` lets the peer send DATAGRAM frames (RFC 9221); `cc`
/// names the congestion controller.
fn transport(
    streams: u32,
    datagrams: bool,
    cc: Option<&str>,
) -> Result<Arc<TransportConfig>, String> {
    let mut t = TransportConfig::default();
    t.congestion_controller_factory(controller(cc)?.0);
    t.max_idle_timeout(None)
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .send_window(SEND_WINDOW)
        .initial_mtu(INITIAL_UDP_PAYLOAD)
        .max_concurrent_bidi_streams(VarInt::from_u32(streams))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .datagram_receive_buffer_size(datagrams.then_some(DATAGRAM_BUFFER))
        .datagram_send_buffer_size(DATAGRAM_BUFFER)
        .keep_alive_interval(None)
        .initial_rtt(Duration::from_millis(333));
    let mut mtud = quinn_proto::MtuDiscoveryConfig::default();
    mtud.upper_bound(MTU_CEILING);
    t.mtu_discovery_config(Some(mtud));
    Ok(Arc::new(t))
}

/// The endpoint configuration (a random stateless-reset key per endpoint).
pub fn endpoint() -> Arc<EndpointConfig> {
    Arc::new(EndpointConfig::default())
}

/// The server's configuration for netsweep's sessions (one stream per connection, and
/// DATAGRAM frames when `datagrams`), made once per process from its identity.
pub fn server(datagrams: bool, cc: Option<&str>) -> Result<Arc<ServerConfig>, String> {
    static STREAM: OnceLock<Result<Arc<ServerConfig>, String>> = OnceLock::new();
    static DATAGRAMS: OnceLock<Result<Arc<ServerConfig>, String>> = OnceLock::new();
    if cc.is_some() {
        // A session's own controller: its configuration is made for it.
        return server_for(ALPN, 1, datagrams, cc);
    }
    let cell = if datagrams { &DATAGRAMS } else { &STREAM };
    cell.get_or_init(|| server_for(ALPN, 1, datagrams, None))
        .clone()
}

/// The server's configuration for the QUIC performance protocol (`perf.rs`): up to
/// [`PERF_STREAMS`] requests at once.
pub fn perf_server() -> Result<Arc<ServerConfig>, String> {
    static SERVER: OnceLock<Result<Arc<ServerConfig>, String>> = OnceLock::new();
    SERVER
        .get_or_init(|| server_for(PERF_ALPN, PERF_STREAMS, false, None))
        .clone()
}

/// The application protocol of the QUIC performance protocol (`perf.rs`).
pub const PERF_ALPN: &[u8] = b"perf";
/// Requests a `perf` client may have open at once.
pub const PERF_STREAMS: u32 = 100;

fn server_for(
    alpn: &[u8],
    streams: u32,
    datagrams: bool,
    cc: Option<&str>,
) -> Result<Arc<ServerConfig>, String> {
    let id = identity::server()?;
    let mut tls = (*id.config).clone();
    tls.alpn_protocols = vec![alpn.to_vec()];
    tls.max_early_data_size = 0;
    let crypto = QuicServerConfig::try_from(tls)
        .map_err(|e| format!("QUIC with the server's TLS identity: {e}"))?;
    let mut c = ServerConfig::with_crypto(Arc::new(crypto));
    c.transport_config(transport(streams, datagrams, cc)?)
        .migration(false)
        .max_incoming(MAX_INCOMING)
        .incoming_buffer_size(INCOMING_BUFFER)
        .incoming_buffer_size_total(INCOMING_BUFFER * MAX_INCOMING as u64);
    Ok(Arc::new(c))
}

/// The client's configuration: it accepts the certificate `want` (`AB:CD:…`) and no other,
/// and DATAGRAM frames when `datagrams`.
pub fn client(want: String, datagrams: bool, cc: Option<&str>) -> Result<ClientConfig, String> {
    client_for(want, ALPN, datagrams, cc)
}

/// [`client`] naming the application protocol `alpn`.
pub fn client_for(
    want: String,
    alpn: &[u8],
    datagrams: bool,
    cc: Option<&str>,
) -> Result<ClientConfig, String> {
    let mut tls = Arc::unwrap_or_clone(pin::client_config(want)?);
    tls.alpn_protocols = vec![alpn.to_vec()];
    let crypto =
        QuicClientConfig::try_from(tls).map_err(|e| format!("QUIC with TLS 1.3 on ring: {e}"))?;
    let mut c = ClientConfig::new(Arc::new(crypto));
    c.transport_config(transport(0, datagrams, cc)?);
    Ok(c)
}
