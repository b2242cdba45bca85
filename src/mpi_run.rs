//! `netsweep run -t mpi` under `mpirun -np 2`: rank 1 serves one session in-process and exits
//! quietly; rank 0 is the client — it finds rank 1's control port over MPI (no HOST) and
//! measures. The session key is fresh per run, made by rank 0 and carried over MPI, so no
//! third process can take the session. Without the `mpi` feature, a clear error.

use crate::usage_error;
use netsweep_engine::auth::AuthKey;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// What this rank does.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub enum Role {
    /// Rank 0: run the client against this control address with this session key; the guard
    /// finalises MPI when dropped.
    Client(SocketAddr, AuthKey, Finish),
    /// Rank 1 served (or failed to); exit with this code.
    Served(ExitCode),
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
/// connect. `Err` is the exit code of a usage error already printed.
#[cfg(not(feature = "mpi"))]
pub fn start(_timeout: Duration, _version: &str) -> Result<Role, ExitCode> {
    Err(usage_error(netsweep_transport::mpi::BUILD_HINT))
}

/// Joins the MPI world: rank 1 serves and returns [`Role::Served`], rank 0 returns where to
/// connect. `Err` is the exit code of a usage error already printed.
#[cfg(feature = "mpi")]
pub fn start(timeout: Duration, version: &str) -> Result<Role, ExitCode> {
    use netsweep_transport::mpi::world;
    let w = world::start().map_err(usage_error)?;
    if let Err(e) = world::require_pair(w) {
        world::finish();
        return Err(usage_error(e));
    }
    if w.rank == world::SERVER_RANK {
        let code = serve_rank(w, timeout, version);
        world::finish();
        return Ok(Role::Served(code));
    }
    let guard = Finish;
    let key = netsweep_engine::auth::nonce().map_err(crate::failure)?;
    let addr = world::find_server(w, &key, timeout).map_err(crate::failure)?;
    let key = AuthKey::from_bytes(&key).ok_or_else(|| crate::failure("bad session key"))?;
    Ok(Role::Client(addr, key, guard))
}

#[cfg(feature = "mpi")]
fn serve_rank(
    w: &'static netsweep_transport::mpi::world::WorldInfo,
    timeout: Duration,
    version: &str,
) -> ExitCode {
    use netsweep_engine::server::{serve, ServeOptions};
    use netsweep_transport::mpi::world;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    let (bind, key) = match world::await_client(w, timeout) {
        Ok(k) => k,
        Err(e) => return crate::failure(e),
    };
    let listener = match std::net::TcpListener::bind((bind, 0)) {
        Ok(l) => l,
        Err(e) => {
            world::offer_server(w, 0);
            return crate::failure(format!("rank 1 cannot listen on {bind}: {e}"));
        }
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    world::offer_server(w, port);
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
    match serve(listener, factory, opts, stop) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => crate::failure(e),
    }
}
