//! The XDP program that hands netsweep's frames to the AF_XDP socket: built from
//! `bpf/redirect.bpf.c` by build.rs, loaded and attached with aya. Attached natively (in the
//! driver) where the driver can, else generically; detached when this value drops — or when
//! the process dies, since the attachment is a BPF link held by a file descriptor.

use aya::maps::XskMap;
use aya::programs::{ProgramError, Xdp, XdpFlags};
use aya::Ebpf;
use std::io;
use std::os::fd::BorrowedFd;

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/redirect.bpf.o"));
const PROGRAM: &str = "netsweep_redirect";
const MAP: &str = "netsweep_xsks";

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Attach {
    /// In the driver, before any socket buffer exists.
    Native,
    /// After the stack built a socket buffer (every interface has it).
    Generic,
}

impl Attach {
    pub(super) fn name(self) -> &'static str {
        match self {
            Attach::Native => "native",
            Attach::Generic => "generic",
        }
    }
}

/// The loaded program, attached to one interface.
pub(super) struct Program {
    ebpf: Ebpf,
    pub(super) attach: Attach,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("attach", &self.attach)
            .finish()
    }
}

fn load_error(e: impl std::fmt::Display) -> io::Error {
    let text = e.to_string();
    let fix = if text.contains("Operation not permitted") || text.contains("EPERM") {
        ": loading BPF needs CAP_BPF and CAP_NET_ADMIN (run as root)"
    } else {
        ""
    };
    io::Error::other(format!("loading the XDP program: {text}{fix}"))
}

/// The errno behind a failed attach, when a system call failed.
fn os_error(e: &ProgramError) -> Option<i32> {
    match e {
        ProgramError::SyscallError(s) => s.io_error.raw_os_error(),
        _ => None,
    }
}

/// A failed attach in words: the call and its error.
fn describe(e: &ProgramError) -> String {
    match e {
        ProgramError::SyscallError(s) => format!("{} failed: {}", s.call, s.io_error),
        e => e.to_string(),
    }
}

/// Loads the program into the kernel (through the verifier) without attaching it.
fn load() -> io::Result<Ebpf> {
    let mut ebpf = Ebpf::load(OBJECT).map_err(load_error)?;
    let prog: &mut Xdp = ebpf
        .program_mut(PROGRAM)
        .ok_or_else(|| io::Error::other("the XDP object has no netsweep_redirect program"))?
        .try_into()
        .map_err(load_error)?;
    prog.load().map_err(load_error)?;
    Ok(ebpf)
}

/// Whether this process may load the program: `netsweep list`'s probe.
pub(super) fn probe() -> Result<(), String> {
    load().map(drop).map_err(|e| e.to_string())
}

impl Program {
    /// Loads the program and attaches it to `ifindex` (`iface` in messages): natively when the
    /// driver supports it, else generically.
    pub(super) fn attach(ifindex: u32, iface: &str) -> io::Result<Self> {
        let mut ebpf = load()?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .and_then(|p| p.try_into().ok())
            .ok_or_else(|| io::Error::other("the XDP program vanished after loading"))?;
        let attach = match prog.attach_to_if_index(ifindex, XdpFlags::DRV_MODE) {
            Ok(_) => Attach::Native,
            Err(native) => match prog.attach_to_if_index(ifindex, XdpFlags::SKB_MODE) {
                Ok(_) => Attach::Generic,
                Err(generic) => {
                    let fix = if os_error(&native) == Some(libc::EBUSY)
                        || os_error(&generic) == Some(libc::EBUSY)
                    {
                        format!(
                            ": another XDP program is attached to {iface} (another xdp session? \
                             `ip link set dev {iface} xdp off` removes a stale one)"
                        )
                    } else {
                        String::new()
                    };
                    return Err(io::Error::other(format!(
                        "attaching the XDP program to {iface}: native: {}; generic: {}{fix}",
                        describe(&native),
                        describe(&generic)
                    )));
                }
            },
        };
        Ok(Self { ebpf, attach })
    }

    /// Sends the frames arriving on `queue` to the AF_XDP socket `fd`.
    pub(super) fn redirect(&mut self, queue: u32, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut map: XskMap<_> = self
            .ebpf
            .map_mut(MAP)
            .ok_or_else(|| io::Error::other("the XDP object has no netsweep_xsks map"))?
            .try_into()
            .map_err(|e| io::Error::other(format!("the netsweep_xsks map: {e}")))?;
        map.set(queue, fd, 0)
            .map_err(|e| io::Error::other(format!("registering the AF_XDP socket: {e}")))
    }
}
