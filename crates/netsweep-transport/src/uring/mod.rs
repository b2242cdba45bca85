//! The `uring` api: `tcp` and `udp` through io_uring (IORING_OP_SEND / IORING_OP_RECV).
//!
//! A single send or receive submits one SQE and waits for its CQE in the same
//! io_uring_enter(2). A batch (stream pattern, `--batch N`) submits N SQEs in one enter and
//! reaps N CQEs: that one call per batch is the point of the api, and the `calls` figures
//! count io_uring_enter calls.
//!
//! Batches are linked chains (IOSQE_IO_LINK) so the kernel runs them in order: sends of one
//! stream never interleave (TCP sends carry MSG_WAITALL so a chain never leaves a gap), and
//! a receive batch is one blocking receive followed by MSG_DONTWAIT receives that take what
//! is already queued, which is recvmmsg's MSG_WAITFORONE. Receive timeouts are the wait's
//! timeout (IORING_ENTER_EXT_ARG); on expiry the pending request is cancelled
//! (IORING_OP_ASYNC_CANCEL) and every CQE reaped before the call returns, so no request
//! ever outlives the buffers it points at.
//!
//! The ring (sized for the batch), the socket's fixed-file registration and the result
//! array are made in `prepare()`, on the thread that drives the endpoint (the ring is
//! single-issuer with deferred task work where the kernel has it, Linux 6.1+); the hot path
//! allocates nothing.
//!
//! Files: this one (building and probing a ring, why io_uring is refused), `endpoint.rs` (the
//! endpoint and its `Endpoint` methods), `submit.rs` (one submission: the SQEs, the wait, and
//! the cancel-and-reap path that keeps buffers alive until every CQE is in).

mod endpoint;
mod submit;

pub use endpoint::UringEndpoint;

use io_uring::{opcode, IoUring};
use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Most SQEs one submission carries: `--batch`'s bound.
pub const MAX_BATCH: usize = netsweep_proto::messages::MAX_BATCH as usize;
/// user_data of cancellation requests (operations use their index in the batch).
pub(super) const CANCEL: u64 = u64::MAX;
/// Marks an operation whose CQE has not arrived yet.
pub(super) const PENDING: i32 = i32::MIN;

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(1);

thread_local! {
    static TAG: Cell<usize> = const { Cell::new(0) };
}

/// A number unique to the calling thread for the life of the process (a single-issuer ring
/// is bound to one thread; addresses and OS thread ids can be reused, these are not).
#[inline]
pub(super) fn thread_tag() -> usize {
    TAG.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        let v = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
        t.set(v);
        v
    })
}

/// Why io_uring cannot be used here, with the fix.
#[cold]
pub fn explain(e: io::Error) -> io::Error {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .map(|s| s.trim().to_string());
    let msg = match (e.raw_os_error(), sysctl.as_deref()) {
        (Some(libc::EPERM | libc::EACCES), Some("2")) => {
            "io_uring is disabled for every process by sysctl kernel.io_uring_disabled=2: \
             `sysctl -w kernel.io_uring_disabled=0` (as root), or use --api basic"
                .to_string()
        }
        (Some(libc::EPERM | libc::EACCES), Some("1")) => {
            "io_uring is disabled by sysctl kernel.io_uring_disabled=1 except for root and the \
             group in kernel.io_uring_group: run as root, join that group, or set \
             kernel.io_uring_disabled=0; or use --api basic"
                .to_string()
        }
        (Some(libc::EPERM | libc::EACCES), _) => format!(
            "io_uring_setup was refused ({e}): a seccomp filter (containers often have one) \
             or an LSM blocks io_uring here: allow io_uring_setup/io_uring_enter, or use --api basic"
        ),
        (Some(libc::ENOSYS), _) => "this kernel has no io_uring (built without CONFIG_IO_URING, \
             or a seccomp filter answers ENOSYS): use --api basic"
            .to_string(),
        (Some(libc::ENOMEM), _) => format!(
            "io_uring_setup: {e}: the locked-memory limit is too small for the ring (raise \
             `ulimit -l`), or use --api basic"
        ),
        _ => format!("io_uring_setup: {e}: use --api basic"),
    };
    io::Error::new(io::ErrorKind::Unsupported, msg)
}

/// Builds a ring of `entries` SQEs: single-issuer with deferred task work (6.1+), else
/// cooperative task work (5.19+), else plain. Requires IORING_FEAT_EXT_ARG (5.11) for
/// timed waits.
pub fn build_ring(entries: u32) -> io::Result<IoUring> {
    let ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .or_else(|_| IoUring::builder().setup_coop_taskrun().build(entries))
        .or_else(|_| IoUring::new(entries))
        .map_err(explain)?;
    if !ring.params().is_feature_ext_arg() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel's io_uring has no timed waits (IORING_FEAT_EXT_ARG, Linux 5.11+): \
             use --api basic",
        ));
    }
    Ok(ring)
}

/// Checks that io_uring works here and has the opcodes this api submits.
pub fn probe() -> Result<(), String> {
    let ring = build_ring(4).map_err(|e| e.to_string())?;
    let mut p = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut p)
        .map_err(|e| format!("io_uring probe: {e}: use --api basic"))?;
    for (code, name) in [
        (opcode::Send::CODE, "IORING_OP_SEND"),
        (opcode::Recv::CODE, "IORING_OP_RECV"),
        (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
    ] {
        if !p.is_supported(code) {
            return Err(format!(
                "this kernel's io_uring lacks {name} (Linux 5.6+): use --api basic"
            ));
        }
    }
    Ok(())
}

/// The ring and what lives beside it; made in `prepare()`.
pub(super) struct Ring {
    pub(super) ring: IoUring,
    /// Thread the ring was made on (a single-issuer ring accepts no other).
    pub(super) owner: usize,
    /// The socket is registered as fixed file 0.
    pub(super) fixed: bool,
    /// Operations one submission may carry.
    pub(super) cap: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basic::Conn;
    use netsweep_endpoint::Endpoint;
    use netsweep_model::spec::Transport;
    use netsweep_proto::messages::GrantedKnobs;
    use socket2::{Domain, Socket, Type};
    use std::net::SocketAddr;
    use std::net::UdpSocket;
    use std::time::Duration;

    /// A uring endpoint on a udp socket connected to `peer`, or None (loudly) when io_uring
    /// is not available here.
    fn udp_endpoint(peer: SocketAddr) -> Option<UringEndpoint> {
        let sock = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        sock.connect(&peer.into()).unwrap();
        let conn = Conn {
            sock,
            transport: Transport::Udp,
            v6: false,
            granted: GrantedKnobs::default(),
            guard: None,
        };
        match UringEndpoint::new(conn) {
            Ok(ep) => Some(ep),
            Err(e) => {
                eprintln!("\n*** SKIPPED: io_uring unavailable here: {e} ***\n");
                None
            }
        }
    }

    #[test]
    fn a_hard_enter_failure_reaps_every_request_before_returning() {
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let Some(mut ep) = udp_endpoint(peer.local_addr().unwrap()) else {
            return;
        };
        ep.set_recv_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let mut buf = vec![0u8; 64];
        // The receive is in flight (nothing was sent) when the enter "fails".
        ep.fail_next_enter = true;
        let e = ep.recv(&mut buf).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOMEM), "{e}");
        // Its CQE is in: the request was cancelled, not left to a closing ring.
        assert_eq!(ep.res[0], -libc::ECANCELED);
        assert!(ep.ring.is_none(), "the failed ring is dropped");
        // The cancelled receive took nothing: the next datagram goes to the next receive.
        peer.send_to(b"after", ep.inner_addr()).unwrap();
        ep.set_recv_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = ep.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"after");
    }

    #[test]
    fn a_short_datagram_batch_says_why_the_next_message_failed() {
        // A port nobody listens on: the first datagram draws an ICMP port unreachable,
        // which the next send reports as ECONNREFUSED.
        let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let Some(mut ep) = udp_endpoint(addr) else {
            return;
        };
        ep.prepare(64, 4).unwrap();
        let data = vec![7u8; 4 * 32];
        let (n, _) = ep.send_batch(&data, 32, 4).unwrap();
        assert_eq!(n, 1, "the chain stops at the refused datagram");
        let e = ep.take_send_error().expect("the reason is kept");
        assert_eq!(e.raw_os_error(), Some(libc::ECONNREFUSED), "{e}");
        assert!(ep.take_send_error().is_none(), "taken once");
    }
}
