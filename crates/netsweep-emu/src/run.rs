//! The emulator's data path: two AF_PACKET sockets, one per port, and a loop on one thread
//! that receives frames in batches (recvmmsg), hands them to the [`Path`] of their direction,
//! and sends what is due in batches (sendmmsg) — sleeping in ppoll until shortly before the
//! next release (timer slack 1 ns) and waiting the last microseconds awake, so a release
//! leaves on time. Frame buffers come from a bounded pool; the report is handed to a writer
//! thread every quarter second (the loop never waits on the file system) and written when
//! the loop stops.

use crate::config::Config;
use crate::frame::{band_of, flow_of, protocol_of};
use crate::path::{Path, Release};
use crate::sched::{self, pin, realtime, Budget, Realtime, Switch};
use crate::stats::{DirectionReport, Report};
use crate::writer::{self, Writer};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Frames received or sent per system call at most.
const BATCH: usize = 64;

/// How long before a release the loop stops sleeping and waits awake.
const SPIN_NS: u64 = 50_000;

/// The longest sleep (so a stop request is seen).
const MAX_SLEEP_NS: u64 = 100_000_000;

/// Most memory the frame buffers may take.
const POOL_BYTES: usize = 256 << 20;

/// How often the report file is rewritten.
const REPORT_EVERY: Duration = Duration::from_millis(250);

/// One port: a packet socket bound to an interface.
#[derive(Debug)]
struct Port {
    fd: OwnedFd,
    /// The interface's `rx_dropped` counter file, and its value when last read.
    rx_dropped: (PathBuf, u64),
}

fn last_error<T>(what: &str) -> io::Result<T> {
    let e = io::Error::last_os_error();
    Err(io::Error::new(e.kind(), format!("{what}: {e}")))
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, value: i32, what: &str) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return last_error(what);
    }
    Ok(())
}

impl Port {
    /// A packet socket on `name` seeing every frame the interface receives (promiscuous),
    /// not the ones this socket sends, and sending past the port's qdisc.
    fn open(name: &str) -> io::Result<Self> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return last_error(&format!("interface {name}"));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2).
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(proto),
            )
        };
        if raw < 0 {
            return last_error("AF_PACKET socket (needs CAP_NET_RAW)");
        }
        // SAFETY: a descriptor we just opened and own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: binds to a sockaddr_ll we own, with its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return last_error(&format!("binding to {name}"));
        }
        let f = fd.as_raw_fd();
        setsockopt_int(
            f,
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            1,
            "PACKET_IGNORE_OUTGOING",
        )?;
        setsockopt_int(
            f,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            1,
            "PACKET_QDISC_BYPASS",
        )?;
        // Room for a burst while the loop sleeps; FORCE needs CAP_NET_ADMIN, else best effort.
        if setsockopt_int(
            f,
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            8 << 20,
            "SO_RCVBUFFORCE",
        )
        .is_err()
        {
            let _ = setsockopt_int(f, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20, "SO_RCVBUF");
        }
        let _ = setsockopt_int(
            f,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            8 << 20,
            "SO_SNDBUFFORCE",
        );
        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex as i32,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        // SAFETY: passes a packet_mreq we own, with its size.
        let rc = unsafe {
            libc::setsockopt(
                f,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mreq as *const libc::packet_mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return last_error(&format!("promiscuous mode on {name}"));
        }
        let rx_dropped = PathBuf::from(format!("/sys/class/net/{name}/statistics/rx_dropped"));
        let now = read_u64(&rx_dropped);
        Ok(Self {
            fd,
            rx_dropped: (rx_dropped, now),
        })
    }

    /// Frames the kernel dropped on their way to this port's socket since the last call:
    /// the interface's receive drops (a full backlog) and the socket's (a full buffer).
    fn kernel_drops(&mut self) -> u64 {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: reads into a tpacket_stats we own, with its size; the kernel resets them.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        let socket = if rc == 0 { u64::from(st.tp_drops) } else { 0 };
        let now = read_u64(&self.rx_dropped.0);
        let device = now.saturating_sub(self.rx_dropped.1);
        self.rx_dropped.1 = now;
        socket + device
    }
}

fn read_u64(p: &std::path::Path) -> u64 {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Frame buffers, handed out by index, at most [`POOL_BYTES`] in all.
#[derive(Debug)]
struct Pool {
    bufs: Vec<Vec<u8>>,
    free: Vec<u32>,
    size: usize,
    most: usize,
}

impl Pool {
    fn new(size: usize) -> Self {
        Self {
            bufs: Vec::new(),
            free: Vec::new(),
            size,
            most: (POOL_BYTES / size.max(1)).max(BATCH * 4),
        }
    }

    fn take(&mut self) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            return Some(i);
        }
        if self.bufs.len() >= self.most {
            return None;
        }
        self.bufs.push(vec![0u8; self.size]);
        Some((self.bufs.len() - 1) as u32)
    }

    fn give(&mut self, i: u32) {
        self.free.push(i);
    }
}

/// Monotonic time, ns.
fn now_ns(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Receives the frames waiting on `port`, one batch at most, into the pool and hands them to
/// `path`; returns how many arrived. One batch, not all that wait: under a flood, draining the
/// socket first would hold every release due meanwhile; what stays waits for the next turn
/// (and the socket's buffer, when full, drops — counted as the kernel's).
fn receive(
    port: &Port,
    pool: &mut Pool,
    path: &mut Path<u32>,
    epoch: Instant,
) -> io::Result<usize> {
    let mut total = 0;
    loop {
        let mut idx = [0u32; BATCH];
        let mut n = 0;
        while n < BATCH {
            match pool.take() {
                Some(i) => {
                    idx[n] = i;
                    n += 1;
                }
                None => break,
            }
        }
        if n == 0 {
            // No buffer left: read one frame into scratch to count it, and drop it.
            let mut scratch = [0u8; 64];
            // SAFETY: receives into a stack buffer of its size, non-blocking.
            let r = unsafe {
                libc::recv(
                    port.fd.as_raw_fd(),
                    scratch.as_mut_ptr().cast(),
                    scratch.len(),
                    libc::MSG_TRUNC,
                )
            };
            if r < 0 {
                return Ok(total);
            }
            path.no_buffer(r as u32);
            total += 1;
            if total >= BATCH {
                return Ok(total);
            }
            continue;
        }
        // SAFETY: iovecs point into distinct pool buffers, each `pool.size` long, alive for
        // the call; the headers point at the iovecs.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: mmsghdr is plain data; all zeroes is an empty header.
        let mut hdr: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for k in 0..n {
            let b = &mut pool.bufs[idx[k] as usize];
            iov[k] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            };
            hdr[k].msg_hdr.msg_iov = &mut iov[k];
            hdr[k].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `n` headers set up above; non-blocking socket.
        let got = unsafe {
            libc::recvmmsg(
                port.fd.as_raw_fd(),
                hdr.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            for &i in &idx[..n] {
                pool.give(i);
            }
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) {
                return Ok(total);
            }
            return Err(e);
        }
        let got = got as usize;
        let now = now_ns(epoch);
        let bands = path.bands();
        let flows = path.wants_flows();
        for k in 0..got {
            let len = (hdr[k].msg_len as usize).min(pool.size);
            let bytes = &pool.bufs[idx[k] as usize][..len];
            if !path.emulates(protocol_of(bytes)) {
                path.bypass(idx[k], len as u32);
                continue;
            }
            let band = band_of(bytes, bands);
            let flow = if flows { flow_of(bytes) } else { 0 };
            let (bufs, free, size, most) = (&mut pool.bufs, &mut pool.free, pool.size, pool.most);
            path.arrive_flow(now, idx[k], len as u32, band, flow, |&src| {
                let copy = free.pop().or_else(|| {
                    (bufs.len() < most).then(|| {
                        bufs.push(vec![0u8; size]);
                        (bufs.len() - 1) as u32
                    })
                })?;
                let (a, b) = (src as usize, copy as usize);
                if a < b {
                    let (lo, hi) = bufs.split_at_mut(b);
                    hi[0][..len].copy_from_slice(&lo[a][..len]);
                } else {
                    let (lo, hi) = bufs.split_at_mut(a);
                    lo[b][..len].copy_from_slice(&hi[0][..len]);
                }
                Some(copy)
            });
        }
        for &i in &idx[got..n] {
            pool.give(i);
        }
        for i in path.take_freed() {
            pool.give(i);
        }
        return Ok(total + got);
    }
}

/// Sends `due` out of `port` in batches; gives every buffer back.
fn send(port: &Port, pool: &mut Pool, path: &mut Path<u32>, due: &mut Vec<Release<u32>>) {
    for chunk in due.chunks(BATCH) {
        // SAFETY: iovecs point into pool buffers alive for the call.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: mmsghdr is plain data; all zeroes is an empty header.
        let mut hdr: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (k, r) in chunk.iter().enumerate() {
            let b = &mut pool.bufs[r.frame as usize];
            iov[k] = libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: r.len as usize,
            };
            hdr[k].msg_hdr.msg_iov = &mut iov[k];
            hdr[k].msg_hdr.msg_iovlen = 1;
        }
        let mut sent = 0;
        while sent < chunk.len() {
            // SAFETY: the headers from `sent` on are set up above.
            let r = unsafe {
                libc::sendmmsg(
                    port.fd.as_raw_fd(),
                    hdr[sent..].as_mut_ptr(),
                    (chunk.len() - sent) as u32,
                    libc::MSG_DONTWAIT,
                )
            };
            if r <= 0 {
                // The first unsent frame is refused (a full device queue, the port down):
                // counted, and the rest of the batch tried.
                path.send_failed();
                sent += 1;
            } else {
                sent += r as usize;
            }
        }
    }
    for r in due.drain(..) {
        pool.give(r.frame);
    }
}

/// Waits until a port is readable or `timeout_ns` passed.
fn wait(ports: &[Port; 2], timeout_ns: u64) {
    let mut fds = [
        libc::pollfd {
            fd: ports[0].fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: ports[1].fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: two pollfds we own; a timespec we own; no signal mask.
    unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
}

/// Runs the emulator described by `config` until `stop` is set, rewriting its report at
/// `report` (atomically) as it goes; `window` set starts a new lateness window (and is
/// cleared).
pub fn run(
    config: &Config,
    stop: &AtomicBool,
    window: &AtomicBool,
    report: &std::path::Path,
) -> io::Result<()> {
    config
        .check()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut ports = [Port::open(&config.ports[0])?, Port::open(&config.ports[1])?];
    // Before this thread is pinned and made real-time, which the writer must not inherit.
    let mut writer = Writer::start(report.to_path_buf())?;
    // SAFETY: prctl with plain integer arguments; 1 ns of timer slack for this thread, so a
    // sleep ends when asked, not up to 50 µs later.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    if let Some(cpu) = config.cpu {
        pin(cpu)?;
    }
    let realtime = config.realtime.then(realtime);
    let epoch = Instant::now();
    let mut rt = Realtime {
        window_start: 0.0,
        // Real-time within its share of each second (see sched), when granted at all.
        budget: matches!(realtime, Some(Ok(()))).then(|| {
            Budget::new(
                sched::PERIOD_NS,
                sched::SHARE,
                now_ns(epoch),
                sched::thread_cpu_ns(),
            )
        }),
        refused: match realtime {
            Some(Err(e)) => Some(e.to_string()),
            _ => None,
        },
    };
    let mut paths = [
        Path::new(config.directions[0].clone(), config.seed),
        Path::new(config.directions[1].clone(), config.seed ^ 0x5bd1_e995),
    ];
    let mut pool = Pool::new(config.max_frame);
    let mut due = Vec::with_capacity(BATCH * 4);
    // The first report goes out at once: the lab waits for it to know the ports are open.
    writer::write(report, &snapshot(config, &paths, epoch, &rt, true, None))?;
    let mut last_report = Instant::now();
    // The budget is checked every millisecond.
    let mut budget_due = 0;
    let result = 'run: loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        if window.swap(false, Ordering::Relaxed) {
            paths.iter_mut().for_each(Path::reset_lateness);
            rt.window_start = epoch.elapsed().as_secs_f64();
            if let Err(e) = writer.post(snapshot(config, &paths, epoch, &rt, true, None)) {
                break 'run Err(e);
            }
        } else if let Err(e) = writer.flush() {
            break 'run Err(e);
        }
        // Receive: from port 0 into direction a→b, from port 1 into b→a.
        for d in 0..2 {
            if let Err(e) = receive(&ports[d], &mut pool, &mut paths[d], epoch) {
                break 'run Err(e);
            }
        }
        let now = now_ns(epoch);
        if let Some(b) = rt.budget.as_mut().filter(|_| now >= budget_due) {
            budget_due = now + 1_000_000;
            let switched = match b.check(now, sched::thread_cpu_ns()) {
                Some(Switch::Ordinary) => sched::ordinary(),
                Some(Switch::Realtime) => sched::realtime(),
                None => Ok(()),
            };
            if let Err(e) = switched {
                break 'run Err(e);
            }
        }
        for d in 0..2 {
            paths[d].poll(now, &mut due);
            send(&ports[1 - d], &mut pool, &mut paths[d], &mut due);
        }
        if last_report.elapsed() >= REPORT_EVERY {
            for d in 0..2 {
                let n = ports[d].kernel_drops();
                paths[d].kernel_drops(n);
            }
            if let Err(e) = writer.post(snapshot(config, &paths, epoch, &rt, true, None)) {
                break 'run Err(e);
            }
            last_report = Instant::now();
        }
        let next = paths.iter().filter_map(|p| p.next_event()).min();
        let left = next.map_or(MAX_SLEEP_NS, |t| t.saturating_sub(now_ns(epoch)));
        if left > SPIN_NS {
            wait(&ports, (left - SPIN_NS).min(MAX_SLEEP_NS));
        }
        // Within SPIN_NS of a release: loop again at once (receiving, then releasing).
    };
    for d in 0..2 {
        let n = ports[d].kernel_drops();
        paths[d].kernel_drops(n);
    }
    // The writer finishes first, so the last report written is this one.
    let written = writer.finish();
    let result = result.and(written);
    let error = result.as_ref().err().map(|e| e.to_string());
    writer::write(report, &snapshot(config, &paths, epoch, &rt, false, error))?;
    result
}

/// The report as it stands.
fn snapshot(
    config: &Config,
    paths: &[Path<u32>; 2],
    epoch: Instant,
    rt: &Realtime,
    running: bool,
    error: Option<String>,
) -> Report {
    Report {
        link: config.link.clone(),
        uptime_s: epoch.elapsed().as_secs_f64(),
        pid: std::process::id(),
        window_start_s: rt.window_start,
        directions: ["a-to-b", "b-to-a"]
            .iter()
            .zip(paths)
            .map(|(name, p)| DirectionReport {
                direction: name.to_string(),
                counters: p.counters(),
                lateness: p.lateness().summary(),
            })
            .collect(),
        running,
        error,
        realtime: rt.budget.is_some(),
        realtime_refused: rt.refused.clone(),
        ordinary_s: rt
            .budget
            .as_ref()
            .map_or(0.0, |b| b.ordinary_ns(now_ns(epoch)) as f64 / 1e9),
    }
}
