//! The ranks of a `netsweep mesh`: names and a fresh session key shared through rank 0, a
//! server per rank, the layout's rounds (a barrier before each), each round's results
//! gathered to rank 0, which rewrites the mesh file after every round and finishes it with
//! the matrices, the flags, heatmaps and an HTML page. Every wait on another rank is bounded
//! by the round's budget and gives way to Ctrl-C/SIGTERM (mpirun's, when a rank dies).

use crate::cli::MeshArgs;
use crate::error::{Error, Result};
use crate::output::sink::Sink;
use crate::signal;
use netsweep_atomic::write_atomic;
use netsweep_engine::auth::{nonce, AuthKey};
use netsweep_engine::engine::{self, RunContext};
use netsweep_engine::server::{serve, ServeOptions};
use netsweep_lab::layout::Layout as LabLayout;
use netsweep_model::mesh::{self, Flow, MeshResult, PairResult, RankInfo};
use netsweep_model::results::{RunStatus, ToolInfo};
use netsweep_model::spec::RunSpec;
use netsweep_model::time;
use netsweep_transport::mpi::world::{self, WorldInfo};
use netsweep_transport::Registry;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

const TAG_NAMES: i32 = 20;
const TAG_TABLE: i32 = 21;
const TAG_PORTS: i32 = 22;
const TAG_ADDRS: i32 = 23;
const TAG_ROUND: i32 = 24;
const TAG_RESULTS: i32 = 25;
const TAG_DONE: i32 = 26;
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What every rank knows once the mesh is set up.
struct Mesh<'a> {
    w: &'a WorldInfo,
    spec: RunSpec,
    key: AuthKey,
    names: Vec<String>,
    ports: Vec<u16>,
    lab: Option<LabLayout>,
    same_host: bool,
    interrupted: Arc<AtomicBool>,
}

/// Runs this rank's part of the mesh.
pub fn run(w: &'static WorldInfo, a: &MeshArgs, spec: RunSpec) -> Result {
    let n = w.size as usize;
    let timeout = Duration::from_nanos(spec.timeout_ns);
    let interrupted = signal::install();
    let lab = match &a.lab {
        Some(id) => Some(load_lab(id, n).map_err(Error::Usage)?),
        None => None,
    };
    let me = w.rank as usize;
    let my_name = match &lab {
        Some(l) => {
            let host = l.end_hosts()[me];
            netsweep_lab::netns::enter(&host.netns).map_err(Error::failed)?;
            host.name.clone()
        }
        None => w.processor.clone(),
    };
    // Rank 0 makes the session key and names every rank.
    let key = if me == 0 {
        nonce().map_err(Error::failed)?.to_vec()
    } else {
        Vec::new()
    };
    let table = exchange(w, &key, my_name.as_bytes(), TAG_NAMES, TAG_TABLE, timeout)
        .map_err(Error::Failed)?;
    let (key, names) = (table.0, table.1);
    let names: Vec<String> = names
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    let Some(key) = AuthKey::from_bytes(&key) else {
        return Err(Error::failed("rank 0 sent no usable session key"));
    };
    let same_host = lab.is_none() && names.iter().all(|h| *h == names[0]);
    let bind: IpAddr = if same_host {
        Ipv4Addr::LOCALHOST.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    let listener = TcpListener::bind((bind, 0))
        .map_err(|e| Error::failed(format!("rank {me} cannot listen on {bind}: {e}")))?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let opts = ServeOptions {
            max_sessions: n,
            max_sessions_per_ip: n,
            auth_key: Some(key.clone()),
            tool_version: VERSION.into(),
            ..ServeOptions::in_process()
        };
        let stop = stop.clone();
        std::thread::spawn(move || serve(listener, Arc::new(Registry), opts, stop))
    };
    let ports = exchange(w, &[], &port.to_be_bytes(), TAG_PORTS, TAG_ADDRS, timeout)
        .map_err(Error::Failed)?
        .1
        .iter()
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .collect();
    let m = Mesh {
        w,
        spec,
        key,
        names,
        ports,
        lab,
        same_host,
        interrupted,
    };
    let code = rounds(&m, a);
    stop.store(true, Ordering::SeqCst);
    let _ = server.join();
    code
}

/// Reads lab `id`'s state and checks it has a host for every rank.
fn load_lab(id: &str, n: usize) -> Result<LabLayout, String> {
    let path = netsweep_lab::state::find(id).ok_or_else(|| {
        format!("no lab {id:?} is up here (`netsweep lab list`; start one with `netsweep lab up`)")
    })?;
    let l = netsweep_lab::state::read(&path).map_err(|e| e.to_string())?;
    let hosts = l.end_hosts().len();
    if hosts < n {
        return Err(format!(
            "lab {id} has {hosts} end hosts (routers aside) for {n} ranks: start at most {hosts}"
        ));
    }
    Ok(l)
}

/// Every rank sends `mine` to rank 0, which sends back `head` and every rank's part:
/// returns (head, parts in rank order). Parts are length-prefixed.
fn exchange(
    w: &WorldInfo,
    head: &[u8],
    mine: &[u8],
    up: i32,
    down: i32,
    timeout: Duration,
) -> Result<(Vec<u8>, Vec<Vec<u8>>), String> {
    let parts = world::gather(w, up, mine, timeout)?;
    let mut all = Vec::new();
    if w.rank == 0 {
        for p in std::iter::once(head).chain(parts.iter().map(Vec::as_slice)) {
            all.extend_from_slice(&(p.len() as u32).to_be_bytes());
            all.extend_from_slice(p);
        }
    }
    let all = world::broadcast(w, down, &all, timeout)?;
    let mut parts = Vec::new();
    let mut rest = all.as_slice();
    while rest.len() >= 4 {
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let body = rest
            .get(4..4 + len)
            .ok_or("a malformed exchange from rank 0")?;
        parts.push(body.to_vec());
        rest = &rest[4 + len..];
    }
    if parts.len() != w.size as usize + 1 {
        return Err("rank 0's exchange names the wrong number of ranks".into());
    }
    let head = parts.remove(0);
    Ok((head, parts))
}

impl Mesh<'_> {
    /// Where rank `client` reaches rank `server`'s control port.
    fn address(&self, client: usize, server: usize) -> Result<SocketAddr, String> {
        let port = self.ports[server];
        if let Some(l) = &self.lab {
            let hosts = l.end_hosts();
            let ip = l
                .address_toward(&hosts[client].name, &hosts[server].name)
                .ok_or_else(|| format!("lab host {} has no address", hosts[server].name))?;
            return Ok(SocketAddr::new(ip.into(), port));
        }
        if self.same_host {
            return Ok(SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port));
        }
        let host = &self.names[server];
        (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve rank {server}'s host {host:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("rank {server}'s host {host:?} resolved to no address"))
    }

    /// Runs one flow from this rank.
    fn measure(&self, round: u32, flow: Flow) -> PairResult {
        let (c, s) = (flow.client as usize, flow.server as usize);
        let mut pr = PairResult {
            round,
            flow,
            result: None,
            error: None,
        };
        let addr = match self.address(c, s) {
            Ok(a) => a,
            Err(e) => {
                pr.error = Some(e);
                return pr;
            }
        };
        let ctx = RunContext {
            server: addr,
            peer_label: format!("rank {s} ({}) at {addr}", self.names[s]),
            tool_version: VERSION,
            interrupt: &self.interrupted,
            started_at: time::rfc3339(SystemTime::now()),
            lab: None,
            auth_key: Some(self.key.clone()),
            tls_pin: None,
        };
        let mut sink = Sink::new(None, None, None, true);
        match engine::run(&self.spec, &ctx, &Registry, &mut sink) {
            Ok(o) => {
                pr.error = o.error.map(|e| e.to_string());
                pr.result = Some(o.result);
            }
            Err(e) => pr.error = Some(e.to_string()),
        }
        pr
    }

    /// The longest one flow of this spec may take: every point's budget, a timeout each, and
    /// the session's setup.
    fn flow_budget(&self) -> Duration {
        let per_point = self.spec.max_point_time_ns + 2 * self.spec.timeout_ns;
        Duration::from_nanos(per_point * self.spec.sizes.len() as u64 + 2 * self.spec.timeout_ns)
    }

    /// Rank 0 collects each rank's part of the round, giving way to an interrupt.
    fn collect(&self, mine: Vec<u8>, budget: Duration) -> Result<Vec<Vec<u8>>, String> {
        if self.w.rank != 0 {
            world::send_tagged(0, TAG_RESULTS, &mine);
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + budget;
        let mut all = vec![mine];
        for r in 1..self.w.size {
            loop {
                match world::receive_tagged(r, TAG_RESULTS, Duration::from_millis(250), "results") {
                    Ok(v) => {
                        all.push(v);
                        break;
                    }
                    Err(e) if Instant::now() >= deadline => return Err(e),
                    Err(_) if self.interrupted.load(Ordering::SeqCst) => {
                        return Err("interrupted (Ctrl-C, or mpirun ending the job because \
                                    a rank died)"
                            .into())
                    }
                    Err(_) => {}
                }
            }
        }
        Ok(all)
    }
}

/// Runs every round; rank 0 writes the file after each and at the end.
fn rounds(m: &Mesh<'_>, a: &MeshArgs) -> Result {
    let n = m.w.size as u32;
    let layout = a.layout.0;
    let plan = mesh::schedule(layout, n);
    let now = SystemTime::now();
    let mut out = MeshResult {
        schema: mesh::SCHEMA.into(),
        schema_version: mesh::SCHEMA_VERSION,
        tool: ToolInfo {
            name: "netsweep".into(),
            version: VERSION.into(),
        },
        started_at: time::rfc3339(now),
        finished_at: None,
        status: RunStatus::Running,
        message: None,
        layout,
        spec: m.spec.clone(),
        ranks: (0..n as usize)
            .map(|r| RankInfo {
                rank: r as u32,
                host: m.names[r].clone(),
                addr: m.address(0, r).map(|a| a.to_string()).unwrap_or_else(|e| e),
            })
            .collect(),
        rounds: plan.len() as u32,
        pairs: Vec::new(),
        matrices: Vec::new(),
        flagged: Vec::new(),
    };
    let path = output_path(a, now);
    let mut error = None;
    for (r, round) in plan.iter().enumerate() {
        let flows: Vec<Flow> = round
            .iter()
            .copied()
            .filter(|f| f.client == m.w.rank as u32)
            .collect();
        let most = plan[r].iter().fold(vec![0u32; n as usize], |mut v, f| {
            v[f.client as usize] += 1;
            v
        });
        let budget = m.flow_budget() * most.iter().copied().max().unwrap_or(1);
        if let Err(e) = world::barrier(m.w, TAG_ROUND, budget) {
            error = Some(e);
            break;
        }
        if m.interrupted.load(Ordering::SeqCst) {
            error = Some("interrupted".into());
            break;
        }
        let mine: Vec<PairResult> = flows.iter().map(|f| m.measure(r as u32, *f)).collect();
        let bytes = serde_json::to_vec(&mine).unwrap_or_default();
        match m.collect(bytes, budget) {
            Ok(parts) => {
                for p in parts {
                    match serde_json::from_slice::<Vec<PairResult>>(&p) {
                        Ok(v) => out.pairs.extend(v),
                        Err(e) => error = Some(format!("a rank sent unreadable results: {e}")),
                    }
                }
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
        if m.w.rank == 0 {
            finish(&mut out, n, None, false);
            if let Err(e) = write(&path, &out) {
                // Every rank must reach the next barrier: stop the rounds for all of them.
                error = Some(e);
                break;
            }
        }
    }
    // Servers stay up until every rank's flows are over.
    if error.is_none() {
        if let Err(e) = world::barrier(m.w, TAG_DONE, m.flow_budget()) {
            error = Some(e);
        }
    }
    if m.w.rank != 0 {
        return match error {
            None => Ok(ExitCode::SUCCESS),
            Some(e) => Err(Error::failed(format!("rank {}: {e}", m.w.rank))),
        };
    }
    let failed = error.is_some();
    finish(&mut out, n, error, true);
    let written = write(&path, &out);
    let html = path.with_extension("html");
    let page = write_atomic(&html, &netsweep_report::mesh::page(&out))
        .map_err(|e| format!("cannot write {}: {e}", html.display()));
    if !a.run.quiet {
        print!("{}", netsweep_report::mesh::text(&out));
        eprintln!(
            "mesh results saved to {} (report: {})",
            path.display(),
            html.display()
        );
    }
    written.and(page).map_err(Error::Failed)?;
    if failed {
        Err(Error::Failed(out.message.unwrap_or_default()))
    } else {
        Ok(ExitCode::SUCCESS)
    }
}

/// Fills in the matrices and flags; at the end also the status.
fn finish(out: &mut MeshResult, n: u32, error: Option<String>, last: bool) {
    out.matrices = mesh::matrices(n, &out.pairs);
    out.flagged = mesh::flag(n, &out.matrices);
    if last {
        out.finished_at = Some(time::rfc3339(SystemTime::now()));
        out.status = if error.is_some() {
            RunStatus::Failed
        } else {
            RunStatus::Complete
        };
        out.message = error.map(|e| {
            format!(
                "{e}; {} flows of {} rounds measured and saved",
                out.pairs.len(),
                out.rounds
            )
        });
    }
}

fn output_path(a: &MeshArgs, now: SystemTime) -> PathBuf {
    match &a.run.output {
        Some(o) => PathBuf::from(o),
        None => PathBuf::from(&a.run.save_dir).join(format!(
            "{}-mesh-{}.json",
            time::compact(now),
            a.layout.0
        )),
    }
}

/// Writes the file whole (a temporary file renamed over it), so a reader never sees half.
fn write(path: &std::path::Path, out: &MeshResult) -> Result<(), String> {
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let text = serde_json::to_string_pretty(out).map_err(|e| e.to_string())?;
    write_atomic(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
