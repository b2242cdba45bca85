//! Who may become a session: at most `--max-sessions` at once, `--max-sessions-per-ip` from
//! one address (an IPv6 client's /64), only within the server's budget, and with `--once`
//! only one ever. netsweep's sessions and iperf3's tests are admitted here alike.

use super::budget::{self, Budget, Cost};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Counts one live thread of a kind while it exists: taken by the accept loop before the thread
/// starts, dropped when the thread ends however it ends (error at any stage, or a panic).
pub(super) struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    pub(super) fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

/// Who may become a session: at most `limit` at once and `per_ip` from one address (an IPv6
/// client's /64), only within the server's budget, and with `once` only one ever.
pub(super) struct Admission {
    pub(super) live: Arc<AtomicUsize>,
    pub(super) admitted: AtomicU64,
    pub(super) limit: usize,
    pub(super) per_ip: usize,
    pub(super) by_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
    pub(super) once: bool,
    pub(super) budget: Arc<Budget>,
}

/// An admitted session's hold on its slots: its address's count and the total, given back
/// when the session ends however it ends.
pub(super) struct Admitted {
    _live: LiveGuard,
    ip: IpAddr,
    by_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// The key one client is counted under: its IPv4 address (an IPv4-mapped one unwrapped), or
/// the /64 of its IPv6 address — one subscriber's prefix, from which it can use as many
/// addresses as it likes.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
        v4 => v4,
    }
}

/// A client key as people read it: `2001:db8::/64` for an IPv6 prefix.
fn key_text(key: IpAddr) -> String {
    match key {
        IpAddr::V6(_) => format!("{key}/64"),
        IpAddr::V4(_) => key.to_string(),
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut by_ip = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = by_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                by_ip.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    /// Slots for a connection from `ip` whose handshake is complete, or why not. Sessions are
    /// admitted from many handshake threads: both counts move under one short lock, taken
    /// only here and when a session ends — never while anything waits on a peer.
    pub(super) fn admit(
        &self,
        ip: IpAddr,
        cost: Cost,
    ) -> Result<(Admitted, budget::Reservation), String> {
        let key = client_key(ip);
        let mut by_ip = self.by_ip.lock().unwrap_or_else(|p| p.into_inner());
        let live = self.live.load(Ordering::SeqCst);
        if live >= self.limit || (self.once && self.admitted.load(Ordering::SeqCst) > 0) {
            return Err(self.refusal());
        }
        if by_ip.get(&key).is_some_and(|&n| n >= self.per_ip) {
            return Err(format!(
                "it is running {} session{} for {}, its --max-sessions-per-ip limit; try \
                 again when one ends, or raise --max-sessions-per-ip on the server",
                self.per_ip,
                if self.per_ip == 1 { "" } else { "s" },
                key_text(key)
            ));
        }
        let reservation = self.budget.reserve(cost)?;
        *by_ip.entry(key).or_insert(0) += 1;
        self.admitted.fetch_add(1, Ordering::SeqCst);
        let admitted = Admitted {
            _live: LiveGuard::new(&self.live),
            ip: key,
            by_ip: self.by_ip.clone(),
        };
        Ok((admitted, reservation))
    }

    /// Why a client was not admitted at the total limit, in the words it is shown.
    fn refusal(&self) -> String {
        if self.once {
            "it serves one run (--once) and that run is in progress; try again when it is done"
                .to_string()
        } else {
            format!(
                "it is running {} session{}, its --max-sessions limit; try again later, or \
                 raise --max-sessions on the server",
                self.limit,
                if self.limit == 1 { "" } else { "s" }
            )
        }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
