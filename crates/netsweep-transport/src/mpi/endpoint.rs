//! The `mpi` data path: one MPI message per `send`/`recv` on the world communicator, tag
//! [`DATA_TAG`]; the session cookie travels first, tag [`COOKIE_TAG`]. Sends are
//! MPI_Isend (every [`WINDOW`]th MPI_Issend: it completes only once the receiver matched it,
//! so a sender never runs more than a window ahead) followed by MPI_Test until done or the
//! send timeout; receives poll MPI_Improbe until a message or the receive timeout, then
//! MPI_Mrecv it. Nothing allocates.

use super::world::WorldInfo;
use ::mpi::ffi;
use netsweep_endpoint::{DataListener, Endpoint};
use netsweep_proto::messages::{DataEndpoint, GrantedKnobs};
use std::ffi::{c_int, c_void};
use std::io;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

/// Tag of data messages.
pub const DATA_TAG: c_int = 7;
/// Tag of the session cookie.
pub const COOKIE_TAG: c_int = 8;
/// Messages a sender may run ahead of its receiver.
pub const WINDOW: u64 = 64;
/// Polls between two looks at the clock.
const SPINS: u32 = 64;

fn mpi_error(call: &str, code: c_int) -> io::Error {
    io::Error::other(format!("{call} failed (MPI error {code})"))
}

fn deadline_passed(deadline: Option<Instant>, spins: &mut u32) -> bool {
    *spins += 1;
    if *spins < SPINS {
        return false;
    }
    *spins = 0;
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// Sends `buf` to `peer` with `tag`, waiting at most `timeout` for the send to complete.
fn send_bytes(
    peer: c_int,
    tag: c_int,
    buf: &[u8],
    sync: bool,
    timeout: Duration,
) -> io::Result<()> {
    let len = c_int::try_from(buf.len())
        .map_err(|_| io::Error::other("an MPI message is at most 2 GiB - 1 bytes"))?;
    let mut req = MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: `buf` outlives the request: this function waits for it (or cancels it and
    // waits for the cancellation, which MPI guarantees returns) before returning.
    let rc = unsafe {
        let post = if sync {
            ffi::MPI_Issend
        } else {
            ffi::MPI_Isend
        };
        post(
            buf.as_ptr() as *const c_void,
            len,
            ffi::RSMPI_UINT8_T,
            peer,
            tag,
            ffi::RSMPI_COMM_WORLD,
            req.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(mpi_error("MPI_Isend", rc));
    }
    // SAFETY: MPI_Isend succeeded and initialised the request.
    let mut req = unsafe { req.assume_init() };
    let deadline = Some(Instant::now() + timeout);
    let mut spins = 0;
    loop {
        let mut done: c_int = 0;
        // SAFETY: a live request; the status is ignored.
        let rc = unsafe { ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        if rc != 0 {
            return Err(mpi_error("MPI_Test", rc));
        }
        if done != 0 {
            return Ok(());
        }
        if deadline_passed(deadline, &mut spins) {
            // SAFETY: cancelling a live request, then MPI_Wait, which returns once the
            // cancellation or the send is complete: the buffer is free again after it.
            unsafe {
                ffi::MPI_Cancel(&mut req);
                ffi::MPI_Wait(&mut req, ffi::RSMPI_STATUS_IGNORE);
            }
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("rank {peer} did not take an MPI message within {timeout:?}"),
            ));
        }
    }
}

/// Receives the next message with `tag` from `peer` into `buf`; `Ok(None)` when none came
/// before `deadline`.
fn recv_bytes(
    peer: c_int,
    tag: c_int,
    buf: &mut [u8],
    deadline: Option<Instant>,
) -> io::Result<Option<usize>> {
    let mut spins = 0;
    loop {
        let mut found: c_int = 0;
        let mut msg = MaybeUninit::<ffi::MPI_Message>::uninit();
        let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
        // SAFETY: out-pointers to locals; MPI writes them.
        let rc = unsafe {
            ffi::MPI_Improbe(
                peer,
                tag,
                ffi::RSMPI_COMM_WORLD,
                &mut found,
                msg.as_mut_ptr(),
                status.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(mpi_error("MPI_Improbe", rc));
        }
        if found != 0 {
            // SAFETY: a message was found: MPI initialised the handle and the status.
            let (mut msg, status) = unsafe { (msg.assume_init(), status.assume_init()) };
            let mut count: c_int = 0;
            // SAFETY: a valid status and datatype.
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
            let n = usize::try_from(count).unwrap_or(usize::MAX);
            let room = c_int::try_from(buf.len()).unwrap_or(c_int::MAX);
            // SAFETY: `buf` has `room` writable bytes; the matched message is consumed
            // (truncated, with an error, when it is larger).
            let rc = unsafe {
                ffi::MPI_Mrecv(
                    buf.as_mut_ptr() as *mut c_void,
                    room,
                    ffi::RSMPI_UINT8_T,
                    &mut msg,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            };
            if n > buf.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "an MPI message of {n} bytes is larger than the {} bytes expected",
                        buf.len()
                    ),
                ));
            }
            if rc != 0 {
                return Err(mpi_error("MPI_Mrecv", rc));
            }
            return Ok(Some(n));
        }
        if deadline_passed(deadline, &mut spins) {
            return Ok(None);
        }
    }
}

/// One rank's end of the data path.
#[derive(Debug)]
pub struct MpiEndpoint {
    peer: c_int,
    recv_timeout: Option<Duration>,
    send_timeout: Duration,
    sends: u64,
    granted: GrantedKnobs,
}

impl MpiEndpoint {
    fn new(w: &WorldInfo, send_timeout: Duration) -> Self {
        let granted = GrantedKnobs {
            notes: vec![format!(
                "mpi: {}; carrier: {}; rank {} on {}",
                w.library, w.carrier, w.rank, w.processor
            )],
            ..Default::default()
        };
        Self {
            peer: w.peer,
            recv_timeout: None,
            send_timeout,
            sends: 0,
            granted,
        }
    }
}

impl Endpoint for MpiEndpoint {
    fn send(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sends += 1;
        let sync = self.sends.is_multiple_of(WINDOW);
        send_bytes(self.peer, DATA_TAG, buf, sync, self.send_timeout)?;
        Ok(buf.len())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let deadline = self.recv_timeout.map(|t| Instant::now() + t);
        recv_bytes(self.peer, DATA_TAG, buf, deadline)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                "no MPI message before the timeout",
            )
        })
    }

    fn is_datagram(&self) -> bool {
        false
    }

    fn set_recv_timeout(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.recv_timeout = timeout;
        if let Some(t) = timeout {
            // A sender blocked longer than its receiver waits is stuck.
            self.send_timeout = self.send_timeout.max(t);
        }
        Ok(())
    }

    fn granted(&self) -> GrantedKnobs {
        self.granted.clone()
    }
}

/// Rank 1's listener: the "connection" is rank 0's cookie message.
#[derive(Debug)]
pub struct MpiListener {
    world: &'static WorldInfo,
}

impl MpiListener {
    /// The listener of this rank's world.
    pub fn new(world: &'static WorldInfo) -> Self {
        Self { world }
    }
}

impl DataListener for MpiListener {
    fn endpoint(&self) -> DataEndpoint {
        DataEndpoint::default()
    }

    fn accept(&mut self, cookie: u64, timeout: Duration) -> io::Result<Box<dyn Endpoint>> {
        let deadline = Instant::now() + timeout;
        let mut b = [0u8; 8];
        loop {
            match recv_bytes(self.world.peer, COOKIE_TAG, &mut b, Some(deadline))? {
                Some(8) if u64::from_be_bytes(b) == cookie => {
                    return Ok(Box::new(MpiEndpoint::new(self.world, timeout)))
                }
                Some(_) => continue,
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "rank 0 sent no session cookie over MPI",
                    ))
                }
            }
        }
    }
}

/// Rank 0's data path: sends the cookie to rank 1.
pub fn connect(
    w: &'static WorldInfo,
    cookie: u64,
    timeout: Duration,
) -> io::Result<Box<dyn Endpoint>> {
    send_bytes(w.peer, COOKIE_TAG, &cookie.to_be_bytes(), false, timeout)?;
    Ok(Box::new(MpiEndpoint::new(w, timeout)))
}
