//! The `mpi` data path: one MPI message per `send`/`recv` on the world communicator, tag
//! [`DATA_TAG`]; the session cookie travels first, tag [`COOKIE_TAG`]. Sends are
//! MPI_Isend (every [`WINDOW`]th MPI_Issend: it completes only once the receiver matched it,
//! so a sender never runs more than a window ahead) followed by MPI_Test until done or the
//! send timeout; receives post MPI_Irecv into the caller's buffer and poll MPI_Test until the
//! message or the receive timeout (then MPI_Cancel). Nothing allocates.

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

/// A wait's end, looked at once every [`SPINS`] polls. A timeout starts at the first look,
/// not when the call starts: a message that is already there (the common case in a timed
/// loop) costs no clock read at all, and the wait is longer by the first SPINS polls at most.
struct Wait {
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    spins: u32,
}

impl Wait {
    /// Gives up `timeout` after the first look at the clock (never with `None`).
    fn after(timeout: Option<Duration>) -> Self {
        Self {
            timeout,
            deadline: None,
            spins: 0,
        }
    }

    /// Gives up at `deadline`.
    fn until(deadline: Instant) -> Self {
        Self {
            timeout: None,
            deadline: Some(deadline),
            spins: 0,
        }
    }

    fn passed(&mut self) -> bool {
        self.spins += 1;
        if self.spins < SPINS {
            return false;
        }
        self.spins = 0;
        let now = Instant::now();
        match (self.deadline, self.timeout) {
            (Some(d), _) => now >= d,
            (None, Some(t)) => {
                self.deadline = Some(now + t);
                false
            }
            (None, None) => false,
        }
    }
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
    let mut wait = Wait::after(Some(timeout));
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
        if wait.passed() {
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

/// Receives the next message with `tag` from `peer` into `buf` through a posted receive
/// (MPI_Irecv, polled with MPI_Test), so an arriving message lands in `buf` directly rather
/// than in the unexpected queue first; `Ok(None)` when none came before `wait` ended. A
/// message larger than `buf` is an error (MPI_ERR_TRUNCATE: the world returns errors).
fn recv_posted(
    peer: c_int,
    tag: c_int,
    buf: &mut [u8],
    wait: &mut Wait,
) -> io::Result<Option<usize>> {
    let room = c_int::try_from(buf.len()).unwrap_or(c_int::MAX);
    let mut req = MaybeUninit::<ffi::MPI_Request>::uninit();
    // SAFETY: `buf` outlives the request: this function waits for it (or cancels it and
    // waits for the cancellation) before returning.
    let rc = unsafe {
        ffi::MPI_Irecv(
            buf.as_mut_ptr() as *mut c_void,
            room,
            ffi::RSMPI_UINT8_T,
            peer,
            tag,
            ffi::RSMPI_COMM_WORLD,
            req.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(mpi_error("MPI_Irecv", rc));
    }
    // SAFETY: MPI_Irecv succeeded and initialised the request.
    let mut req = unsafe { req.assume_init() };
    let mut status = MaybeUninit::<ffi::MPI_Status>::uninit();
    loop {
        let mut done: c_int = 0;
        // SAFETY: a live request and an out-pointer to a local status.
        let rc = unsafe { ffi::MPI_Test(&mut req, &mut done, status.as_mut_ptr()) };
        if rc == ffi::MPI_ERR_TRUNCATE as c_int {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "an MPI message was larger than the {} bytes expected",
                    buf.len()
                ),
            ));
        }
        if rc != 0 {
            return Err(mpi_error("MPI_Test (receive)", rc));
        }
        if done != 0 {
            break;
        }
        if wait.passed() {
            let mut cancelled: c_int = 0;
            // SAFETY: cancelling a live request, then waiting for it: once MPI_Wait returns
            // the buffer is ours again, whether the receive completed or was cancelled.
            unsafe {
                ffi::MPI_Cancel(&mut req);
                ffi::MPI_Wait(&mut req, status.as_mut_ptr());
                ffi::MPI_Test_cancelled(status.as_ptr(), &mut cancelled);
            }
            if cancelled != 0 {
                return Ok(None);
            }
            break;
        }
    }
    let mut count: c_int = 0;
    // SAFETY: the request completed: MPI wrote the status.
    unsafe { ffi::MPI_Get_count(status.as_ptr(), ffi::RSMPI_UINT8_T, &mut count) };
    Ok(Some(usize::try_from(count).unwrap_or(0)))
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
        recv_posted(
            self.peer,
            DATA_TAG,
            buf,
            &mut Wait::after(self.recv_timeout),
        )?
        .ok_or_else(|| {
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
        let mut wait = Wait::until(Instant::now() + timeout);
        let mut b = [0u8; 8];
        loop {
            match recv_posted(self.world.peer, COOKIE_TAG, &mut b, &mut wait)? {
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
