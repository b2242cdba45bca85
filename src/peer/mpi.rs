//! `netsweep run -t mpi` under `mpirun -np 2`: rank 1 serves one session in-process and exits
//! quietly; rank 0 is the client — it finds rank 1's control port over MPI (no HOST) and
//! measures. The session key is fresh per run, made by rank 0 and carried over MPI, so no
//! third process can take the session. Without the `mpi` feature, a clear error.

use crate::error::{Error, Result};
use netsweep_engine::auth::AuthKey;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The environment variable that tells rank 1 which of its addresses to serve the control
/// connection on, and rank 0 to connect to: needed where the ranks share a processor name but
/// not a network, as two network namespaces of one host do (the lab's MPI runs set it).
pub use netsweep_lab::mpi_launch::CONTROL_ENV;

/// [`CONTROL_ENV`]'s address, if set.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
fn control_address() -> Result<Option<IpAddr>> {
    match std::env::var(CONTROL_ENV) {
        Err(_) => Ok(None),
        Ok(v) => v.parse().map(Some).map_err(|_| {
            Error::usage(format!(
                "{CONTROL_ENV}={v:?} is not an IP address: set it to the address rank 1 is \
                 reached at (e.g. {CONTROL_ENV}=198.18.0.2), or unset it"
            ))
        }),
    }
}

/// What this rank does.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub enum Role {
    /// Rank 0: run the client against this control address with this session key; the guard
    /// finalises MPI when dropped.
    Client(SocketAddr, AuthKey, Finish),
    /// Rank 1 served its session: exit 0.
    Served,
}

/// Finalises MPI when dropped (every exit path of rank 0).
pub struct Finish;

impl Drop for Finish {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        netsweep_transport::mpi::world::finish();
    }
}

/// Joins the MPI world: rank 1 serves and returns [`Role::Served`], rank 0 returns where to
/// connect.
#[cfg(not(feature = "mpi"))]
pub fn start(_timeout: Duration, _version: &str) -> Result<Role> {
    Err(Error::usage(netsweep_transport::mpi::BUILD_HINT))
}

/// Joins the MPI world: rank 1 serves and returns [`Role::Served`], rank 0 returns where to
/// connect.
#[cfg(feature = "mpi")]
pub fn start(timeout: Duration, version: &str) -> Result<Role> {
    use netsweep_transport::mpi::world;
    let w = world::start().map_err(Error::Usage)?;
    if let Err(e) = world::require_pair(w) {
        world::finish();
        return Err(Error::Usage(e));
    }
    if w.rank == world::SERVER_RANK {
        let served = serve_rank(w, timeout, version);
        world::finish();
        return served.map(|()| Role::Served);
    }
    let guard = Finish;
    let key = netsweep_engine::auth::nonce().map_err(Error::failed)?;
    let addr = world::find_server(w, &key, timeout).map_err(Error::failed)?;
    let key = AuthKey::from_bytes(&key).ok_or_else(|| Error::failed("bad session key"))?;
    Ok(Role::Client(addr, key, guard))
}

#[cfg(feature = "mpi")]
fn serve_rank(
    w: &'static netsweep_transport::mpi::world::WorldInfo,
    timeout: Duration,
    version: &str,
) -> Result<()> {
    use netsweep_engine::server::{serve, ServeOptions};
    use netsweep_transport::mpi::world;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let control = match control_address() {
        Ok(c) => c,
        Err(e) => {
            // Rank 0 waits for the offer: tell it there is no server.
            let _ = world::await_client(w, timeout, None);
            world::offer_server(w, 0, None);
            return Err(e);
        }
    };
    let (bind, key) = world::await_client(w, timeout, control).map_err(Error::failed)?;
    let listener = std::net::TcpListener::bind((bind, 0)).map_err(|e| {
        world::offer_server(w, 0, control);
        Error::failed(format!("rank 1 cannot listen on {bind}: {e}"))
    })?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    world::offer_server(w, port, control);
    let opts = ServeOptions {
        once: true,
        tool_version: version.into(),
        auth_key: AuthKey::from_bytes(&key),
        first_session_within: Some(timeout),
        verbose: true,
        ..ServeOptions::in_process()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let factory = Arc::new(netsweep_transport::Registry);
    serve(listener, factory, opts, stop).map_err(Error::failed)
}
