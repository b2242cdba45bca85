//! `serve --rpm`: the responsiveness port under the server's rules. The HTTP server itself
//! (netsweep-rpm, on tokio and hyper) is the caller's, handed in as an [`RpmServer`], so that
//! this crate and everything built on it (the fuzz targets) stay free of an async runtime;
//! this module is its admission.
//! A responsiveness client opens many connections — up to 16 loading the path and a new one
//! per foreign probe, dozens a second — so a *client address* is the session: its first
//! connection whose TLS handshake completes is admitted by the same admission as every
//! netsweep session and iperf3 test (`--max-sessions`, `--max-sessions-per-ip`, the budget,
//! `--allow-from`), its later ones join it up to [`MAX_CONNECTIONS_PER_SESSION`] at once, and
//! the session (its slots, its reservation) ends when its last connection closes. Each
//! connection lasts at most `--max-duration`.

use super::admission::{self, Admission};
use super::budget::{Cost, Reservation};
use super::log::{log, Event};
use super::metrics::Protocol;
use super::{client_key, ServeOptions};
use std::any::Any;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::Duration;

/// What an admitted connection holds until it closes.
pub type Admitted = Box<dyn Any + Send + Sync>;
/// The admission a responsiveness server asks for each connection whose TLS handshake is
/// done: a slot, or the reason it is refused (which the client is shown).
pub type Admit = Arc<dyn Fn(SocketAddr) -> Result<Admitted, String> + Send + Sync>;
/// The responsiveness port's server: serves with `Admit` and the limits until the flag is set.
pub type RpmServer = Box<dyn FnOnce(Admit, RpmLimits, Arc<AtomicBool>) -> io::Result<()> + Send>;

/// The server's limits as they apply to a responsiveness connection.
#[derive(Debug, Clone, Copy)]
pub struct RpmLimits {
    /// The longest one connection may last (`--max-duration`).
    pub max_connection: Duration,
    /// How long a connection may take to finish its TLS handshake.
    pub handshake_timeout: Duration,
}

/// Most connections one client address may hold open at once: 16 loading, and the foreign
/// probes' — which some clients (Cloudflare's mach) leave open for a while after their GET: it
/// held more than 64 at once against loopback.
pub const MAX_CONNECTIONS_PER_SESSION: usize = 256;

/// What a responsiveness session may hold: each connection's HTTP/2 and TLS buffers (a probe's
/// a few KiB, a loaded one's up to its windows; 256 KiB each on average allowed) and its socket.
pub const SESSION_COST: Cost = Cost {
    memory: MAX_CONNECTIONS_PER_SESSION as u64 * (256 << 10),
    threads: 0,
    fds: MAX_CONNECTIONS_PER_SESSION as u64,
};

/// One client address's session: its admission slots and budget, held while any of its
/// connections is open.
struct Session {
    _admitted: admission::Admitted,
    _reservation: Reservation,
    number: u64,
    peer: SocketAddr,
    connections: AtomicUsize,
    opts: Arc<ServeOptions>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.opts.count_end(Protocol::Rpm, true);
        if self.opts.verbose {
            log(
                self.opts.log_format,
                Event::SessionEnd,
                Some(self.number),
                Some(self.peer),
                None,
            );
        }
    }
}

/// A connection's hold on its session.
struct Joined(Arc<Session>);

impl Drop for Joined {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The live sessions by client key.
#[derive(Default)]
struct Sessions(Mutex<HashMap<IpAddr, Weak<Session>>>);

/// Starts the responsiveness port's thread; it stops with `stop`.
pub(super) fn spawn(
    server: RpmServer,
    admission: Arc<Admission>,
    opts: Arc<ServeOptions>,
    numbers: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> io::Result<thread::JoinHandle<()>> {
    let sessions = Arc::new(Sessions::default());
    let o = opts.clone();
    let admit: Admit = Arc::new(move |peer: SocketAddr| {
        if !o.admits_address(peer, Protocol::Rpm) {
            return Err("the address is not in the server's --allow-from".to_string());
        }
        join(peer, &sessions, &admission, &o, &numbers).map(|j| Box::new(j) as Admitted)
    });
    let limits = RpmLimits {
        max_connection: opts.limits.max_session,
        handshake_timeout: opts.limits.handshake_timeout,
    };
    thread::Builder::new()
        .name("netsweep-rpm".into())
        .spawn(move || {
            if let Err(e) = server(admit, limits, stop) {
                let m = format!("the rpm port stopped: {e}");
                log(opts.log_format, Event::Error, None, None, Some(&m));
            }
        })
}

/// Joins `peer`'s session, or admits a new one for it; or says why not (the reason its
/// client is shown, and logged).
fn join(
    peer: SocketAddr,
    sessions: &Sessions,
    admission: &Admission,
    opts: &Arc<ServeOptions>,
    numbers: &AtomicU64,
) -> Result<Joined, String> {
    let key = client_key(peer.ip());
    let mut map = sessions.0.lock().unwrap_or_else(|p| p.into_inner());
    map.retain(|_, w| w.strong_count() > 0);
    let refuse = |why: String| {
        opts.count(Protocol::Rpm, Event::Refused);
        if opts.verbose {
            log(
                opts.log_format,
                Event::Refused,
                None,
                Some(peer),
                Some(&format!("rpm port: {why}")),
            );
        }
        Err(why)
    };
    if let Some(s) = map.get(&key).and_then(Weak::upgrade) {
        if s.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS_PER_SESSION {
            s.connections.fetch_sub(1, Ordering::SeqCst);
            return refuse(format!(
                "{key} holds {MAX_CONNECTIONS_PER_SESSION} responsiveness connections, the most \
                 one client may; close some"
            ));
        }
        return Ok(Joined(s));
    }
    let (admitted, reservation) = match admission.admit(peer.ip(), SESSION_COST) {
        Ok(a) => a,
        Err(why) => return refuse(why),
    };
    let number = numbers.fetch_add(1, Ordering::SeqCst) + 1;
    opts.count(Protocol::Rpm, Event::SessionStart);
    if opts.verbose {
        log(
            opts.log_format,
            Event::SessionStart,
            Some(number),
            Some(peer),
            Some("rpm: a responsiveness client"),
        );
    }
    let s = Arc::new(Session {
        _admitted: admitted,
        _reservation: reservation,
        number,
        peer,
        connections: AtomicUsize::new(1),
        opts: opts.clone(),
    });
    map.insert(key, Arc::downgrade(&s));
    Ok(Joined(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn admission(limit: usize, per_ip: usize) -> Admission {
        Admission {
            live: Arc::new(AtomicUsize::new(0)),
            admitted: AtomicU64::new(0),
            limit,
            per_ip,
            by_ip: Arc::new(std::sync::Mutex::new(HashMap::new())),
            once: false,
            budget: super::super::budget::Budget::new(Cost {
                memory: 1 << 40,
                threads: 1 << 20,
                fds: 1 << 20,
            }),
        }
    }

    #[test]
    fn one_address_is_one_session_of_at_most_256_connections() {
        let (a, sessions, numbers) = (admission(2, 4), Sessions::default(), AtomicU64::new(0));
        let opts = Arc::new(ServeOptions {
            verbose: false,
            ..ServeOptions::default()
        });
        let peer = |ip: &str, port: u16| SocketAddr::new(ip.parse().unwrap(), port);
        let mut held: Vec<Joined> = (0..MAX_CONNECTIONS_PER_SESSION as u16)
            .map(|i| join(peer("198.18.0.1", 1000 + i), &sessions, &a, &opts, &numbers).unwrap())
            .collect();
        // One session for all of them: one slot taken of two.
        assert_eq!(a.live.load(Ordering::SeqCst), 1);
        let e = join(peer("198.18.0.1", 9), &sessions, &a, &opts, &numbers)
            .err()
            .unwrap();
        assert!(e.contains("256 responsiveness connections"), "{e}");
        // One closes: room for one more, in the same session.
        held.pop();
        held.push(join(peer("198.18.0.1", 9), &sessions, &a, &opts, &numbers).unwrap());
        assert_eq!(a.live.load(Ordering::SeqCst), 1);
        // Another address is another session; a third finds --max-sessions (2) taken.
        let other = join(peer("198.18.0.2", 1), &sessions, &a, &opts, &numbers).unwrap();
        assert_eq!(a.live.load(Ordering::SeqCst), 2);
        let e = join(peer("198.18.0.3", 1), &sessions, &a, &opts, &numbers)
            .err()
            .unwrap();
        assert!(e.contains("--max-sessions"), "{e}");
        // The session ends with its last connection, and its slot is free again.
        drop(held);
        assert_eq!(a.live.load(Ordering::SeqCst), 1);
        assert!(join(peer("198.18.0.3", 1), &sessions, &a, &opts, &numbers).is_ok());
        drop(other);
    }
}
