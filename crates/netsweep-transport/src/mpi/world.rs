//! The MPI world of a `-t mpi` run: MPI is initialised once per process (thread level
//! SERIALIZED: rank 1's session thread takes the cookie and its data thread then makes every
//! data-path call, never two at once), the world must hold exactly two
//! ranks, and before the session rank 0 (the client) and rank 1 (the server) exchange, over
//! MPI, what the control connection needs: rank 0's host and a fresh session key, then the
//! port rank 1 listens on. Every wait for the other rank is bounded.

use ::mpi::environment::{self, Universe};
use ::mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use ::mpi::topology::{Communicator, SimpleCommunicator};
use ::mpi::Threading;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The rank that runs the client (and saves the results).
pub const CLIENT_RANK: i32 = 0;
/// The rank that runs the server.
pub const SERVER_RANK: i32 = 1;
/// Why the data path cannot open before [`start`].
pub const NOT_STARTED: &str = "the mpi transport runs under mpirun: \
     `mpirun -np 2 netsweep run -t mpi` (rank 0 measures, rank 1 serves; no HOST)";

const RENDEZVOUS_TAG: i32 = 9;

/// What a rank knows of its MPI world.
#[derive(Debug, Clone)]
pub struct WorldInfo {
    /// This process's rank.
    pub rank: i32,
    /// Ranks in the world.
    pub size: i32,
    /// The other rank of a two-rank run (`-t mpi`): 1 for rank 0, 0 for the others.
    pub peer: i32,
    /// MPI_Get_library_version, first line.
    pub library: String,
    /// This rank's processor name (MPI_Get_processor_name).
    pub processor: String,
    /// What was forced to carry the bytes (`OMPI_MCA_pml`, `OMPI_MCA_btl`), or that the
    /// library chose.
    pub carrier: String,
}

static WORLD: OnceLock<WorldInfo> = OnceLock::new();
static UNIVERSE: Mutex<Option<Universe>> = Mutex::new(None);

/// The world, once [`start`] succeeded.
pub fn current() -> Option<&'static WorldInfo> {
    WORLD.get()
}

/// True when the process was started by an MPI launcher (Open MPI's, MPICH's or PMIx's
/// environment is there): outside one, MPI would start a world of one.
pub fn under_launcher() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some())
}

/// Initialises MPI (once) and checks the world: two ranks, thread level at least
/// SERIALIZED (the server's data thread makes every data-path call while the control thread
/// waits). SERIALIZED is asked, not MULTIPLE: nothing more is needed, and a library may lock
/// more for MULTIPLE (Debian's Open MPI 4.1 locks its matching for any level above SINGLE,
/// docs/mpi.md). Errors say what to do.
pub fn start() -> Result<&'static WorldInfo, String> {
    if let Some(w) = WORLD.get() {
        return Ok(w);
    }
    if !under_launcher() {
        return Err(NOT_STARTED.into());
    }
    let (universe, level) = ::mpi::initialize_with_threading(Threading::Serialized)
        .ok_or("MPI was already initialised in this process")?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    *UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()) = Some(universe);
    if size < 2 {
        finish();
        return Err(format!(
            "this MPI world has {size} rank: start two or more (`mpirun -np 2 netsweep run \
             -t mpi`, `mpirun -np N netsweep mesh`)"
        ));
    }
    if !matches!(level, Threading::Serialized | Threading::Multiple) {
        finish();
        return Err(format!(
            "this MPI library grants thread level {level:?}; the mpi transport needs \
             SERIALIZED or MULTIPLE (Open MPI built with thread support)"
        ));
    }
    // Errors come back as return codes (a truncated message is the caller's error to
    // report), not as the default handler's abort of the whole job.
    // SAFETY: MPI is initialised; both handles are the library's predefined ones.
    unsafe {
        ::mpi::ffi::MPI_Comm_set_errhandler(
            ::mpi::ffi::RSMPI_COMM_WORLD,
            ::mpi::ffi::RSMPI_ERRORS_RETURN,
        );
    }
    let library = environment::library_version()
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .trim_end_matches([',', ' ', '\0'])
        .to_string();
    let info = WorldInfo {
        rank,
        size,
        peer: if rank == 0 { 1 } else { 0 },
        library,
        processor: environment::processor_name().unwrap_or_default(),
        carrier: carrier(),
    };
    Ok(WORLD.get_or_init(|| info))
}

/// Checks the world of `run -t mpi`: exactly two ranks.
pub fn require_pair(w: &WorldInfo) -> Result<(), String> {
    if w.size == 2 {
        Ok(())
    } else {
        Err(format!(
            "the mpi transport needs exactly two ranks (this world has {}): \
             `mpirun -np 2 netsweep run -t mpi` (for more, `mpirun -np N netsweep mesh`)",
            w.size
        ))
    }
}

/// What the user forced to carry the bytes, from Open MPI's MCA environment (`mpirun --mca
/// btl tcp,self` sets `OMPI_MCA_btl`); otherwise the library chose (Open MPI prefers shared
/// memory between ranks on one host).
fn carrier() -> String {
    let forced: Vec<String> = ["pml", "btl", "mtl"]
        .iter()
        .filter_map(|k| {
            std::env::var(format!("OMPI_MCA_{k}"))
                .ok()
                .map(|v| format!("{k}={v}"))
        })
        .collect();
    if forced.is_empty() {
        "chosen by the library (no --mca pml/btl/mtl given)".into()
    } else {
        forced.join(" ")
    }
}

/// Finalises MPI (MPI_Finalize), once; a no-op when it was never initialised.
pub fn finish() {
    let u = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    drop(u);
}

/// Waits up to `timeout` for the next rendezvous message from `from`.
fn receive(from: i32, timeout: Duration, what: &str) -> Result<Vec<u8>, String> {
    receive_tagged(from, RENDEZVOUS_TAG, timeout, what)
}

/// Waits up to `timeout` for the next message with `tag` from `from` (polling MPI_Improbe
/// every millisecond: for control between ranks, never for data).
pub fn receive_tagged(
    from: i32,
    tag: i32,
    timeout: Duration,
    what: &str,
) -> Result<Vec<u8>, String> {
    let world = SimpleCommunicator::world();
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = world
            .process_at_rank(from)
            .immediate_matched_probe_with_tag(tag)
        {
            let (v, _) = found.matched_receive_vec::<u8>();
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "rank {from} sent no {what} within {timeout:?} (is it running netsweep too?)"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn send(to: i32, bytes: &[u8]) {
    send_tagged(to, RENDEZVOUS_TAG, bytes);
}

/// Sends `bytes` to rank `to` with `tag` (small control messages: MPI buffers them).
pub fn send_tagged(to: i32, tag: i32, bytes: &[u8]) {
    SimpleCommunicator::world()
        .process_at_rank(to)
        .send_with_tag(bytes, tag);
}

/// Every rank sends `mine` to rank 0; rank 0 returns all of them in rank order, the others
/// an empty list. Bounded by `timeout` per rank.
pub fn gather(
    w: &WorldInfo,
    tag: i32,
    mine: &[u8],
    timeout: Duration,
) -> Result<Vec<Vec<u8>>, String> {
    if w.rank != 0 {
        send_tagged(0, tag, mine);
        return Ok(Vec::new());
    }
    let mut all = vec![mine.to_vec()];
    for r in 1..w.size {
        all.push(receive_tagged(r, tag, timeout, "its part")?);
    }
    Ok(all)
}

/// Rank 0 sends `bytes` to every other rank, which return what they got; bounded by
/// `timeout`.
pub fn broadcast(
    w: &WorldInfo,
    tag: i32,
    bytes: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    if w.rank == 0 {
        for r in 1..w.size {
            send_tagged(r, tag, bytes);
        }
        return Ok(bytes.to_vec());
    }
    receive_tagged(0, tag, timeout, "rank 0's broadcast")
}

/// Every rank waits until all have reached it (through rank 0), at most `timeout`.
pub fn barrier(w: &WorldInfo, tag: i32, timeout: Duration) -> Result<(), String> {
    gather(w, tag, &[], timeout)?;
    broadcast(w, tag, &[], timeout).map(drop)
}

/// Rank 0: sends its processor name and the session `key` to rank 1, waits for the port its
/// server listens on, and returns the control address (loopback when both ranks share a host,
/// else rank 1's processor name resolved).
pub fn find_server(w: &WorldInfo, key: &[u8], timeout: Duration) -> Result<SocketAddr, String> {
    let mut hello = Vec::with_capacity(1 + key.len() + w.processor.len());
    hello.push(key.len() as u8);
    hello.extend_from_slice(key);
    hello.extend_from_slice(w.processor.as_bytes());
    send(w.peer, &hello);
    let reply = receive(w.peer, timeout, "server port")?;
    if reply.len() < 2 {
        return Err("rank 1 sent a malformed server port".into());
    }
    let port = u16::from_be_bytes([reply[0], reply[1]]);
    if port == 0 {
        return Err("rank 1 could not start its server (its message says why)".into());
    }
    let host = String::from_utf8_lossy(&reply[2..]).into_owned();
    if host == w.processor {
        return Ok(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port));
    }
    (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve rank 1's host {host:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("rank 1's host {host:?} resolved to no address"))
}

/// Rank 1: waits for rank 0's hello; returns the address to listen on (`control` when given,
/// else loopback when both ranks share a host, else every address) and the session key.
pub fn await_client(
    w: &WorldInfo,
    timeout: Duration,
    control: Option<IpAddr>,
) -> Result<(IpAddr, Vec<u8>), String> {
    let hello = receive(w.peer, timeout, "hello")?;
    let n = *hello.first().ok_or("rank 0 sent an empty hello")? as usize;
    if hello.len() < 1 + n {
        return Err("rank 0 sent a malformed hello".into());
    }
    let key = hello[1..1 + n].to_vec();
    let host = String::from_utf8_lossy(&hello[1 + n..]);
    let bind: IpAddr = if let Some(ip) = control {
        ip
    } else if host == w.processor {
        Ipv4Addr::LOCALHOST.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    Ok((bind, key))
}

/// Rank 1: tells rank 0 the port its server listens on (0: it could not listen) and where:
/// at `control` when given (two network namespaces of one host share a processor name, so
/// the name cannot tell rank 0 where rank 1 is), else at rank 1's processor name.
pub fn offer_server(w: &WorldInfo, port: u16, control: Option<IpAddr>) {
    let mut reply = port.to_be_bytes().to_vec();
    match control {
        Some(ip) => reply.extend_from_slice(ip.to_string().as_bytes()),
        None => reply.extend_from_slice(w.processor.as_bytes()),
    }
    send(w.peer, &reply);
}
