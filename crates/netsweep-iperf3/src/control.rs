//! The control connection's state sequence, client side: cookie, PARAM_EXCHANGE and the
//! parameters, CREATE_STREAMS and the data connection, TEST_START/TEST_RUNNING, the data
//! phase, TEST_END, EXCHANGE_RESULTS (ours first, then the server's), DISPLAY_RESULTS,
//! IPERF_DONE. Every read has the test's timeout.

use crate::data::{self, DataConn};
use crate::error::Iperf3Error;
use crate::outcome::{ClientMeasure, ServerReport, TestOutcome};
use crate::wire::{self, State, COOKIE_SIZE};
use crate::TestParams;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The control connection (a TCP stream; any byte stream for the fuzz target).
pub(crate) struct Control<S = TcpStream> {
    s: S,
    addr: SocketAddr,
    timeout: Duration,
}

impl Control {
    fn connect(addr: SocketAddr, timeout: Duration) -> Result<Control, Iperf3Error> {
        let s = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|source| Iperf3Error::Connect { addr, source })?;
        let set = |r: std::io::Result<()>| {
            r.map_err(|e| Iperf3Error::io(e, "setting up the control connection", timeout))
        };
        set(s.set_nodelay(true))?;
        set(s.set_read_timeout(Some(timeout)))?;
        set(s.set_write_timeout(Some(timeout)))?;
        Ok(Control { s, addr, timeout })
    }
}

impl<S: Read + Write> Control<S> {
    /// The control connection over the byte stream `s` (the fuzz targets' in-memory one).
    #[cfg(fuzzing)]
    pub(crate) fn over(s: S, addr: SocketAddr, timeout: Duration) -> Control<S> {
        Control { s, addr, timeout }
    }

    pub(crate) fn send(&mut self, bytes: &[u8], doing: &str) -> Result<(), Iperf3Error> {
        self.s
            .write_all(bytes)
            .map_err(|e| Iperf3Error::io(e, doing, self.timeout))
    }

    fn read(&mut self, buf: &mut [u8], waiting_for: &str) -> Result<(), Iperf3Error> {
        self.s
            .read_exact(buf)
            .map_err(|e| Iperf3Error::io(e, &format!("waiting for {waiting_for}"), self.timeout))
    }

    /// Reads one state byte and insists on `want`; the server's refusals become their errors.
    pub(crate) fn expect(&mut self, want: State, waiting_for: &str) -> Result<(), Iperf3Error> {
        let mut b = [0u8; 1];
        self.read(&mut b, waiting_for)?;
        match State::from_byte(b[0]) {
            Some(s) if s == want => Ok(()),
            Some(State::AccessDenied) => Err(Iperf3Error::Busy(self.addr)),
            Some(State::ServerTerminate) => Err(Iperf3Error::Terminated),
            Some(State::ServerError) => {
                let mut e = [0u8; 8];
                self.read(&mut e, "the server's error code")?;
                let code = i32::from_be_bytes(e[..4].try_into().expect("4 bytes"));
                let errno = i32::from_be_bytes(e[4..].try_into().expect("4 bytes"));
                Err(Iperf3Error::Server { code, errno })
            }
            _ => Err(Iperf3Error::Unexpected {
                waiting_for: waiting_for.to_string(),
                got: b[0] as i8,
            }),
        }
    }

    pub(crate) fn read_frame(&mut self, waiting_for: &str) -> Result<Vec<u8>, Iperf3Error> {
        let mut h = [0u8; 4];
        self.read(&mut h, waiting_for)?;
        let n = wire::frame_len(h);
        if n > wire::MAX_FRAME {
            return Err(Iperf3Error::BadResults(format!(
                "{waiting_for} announces {n} bytes, more than the {} accepted",
                wire::MAX_FRAME
            )));
        }
        let mut body = vec![0u8; n as usize];
        self.read(&mut body, waiting_for)?;
        Ok(body)
    }
}

/// A fresh cookie from the kernel's random source.
fn new_cookie() -> [u8; COOKIE_SIZE] {
    let mut r = [0u8; COOKIE_SIZE - 1];
    fill_random(&mut r);
    wire::cookie_from(&r)
}

/// Fills `buf` from the kernel's random source (getrandom, in pieces of at most 32 MiB); on
/// the unreachable failure (Linux ≥ 3.17) from the clock, so the bytes still differ per call.
pub(crate) fn fill_random(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        let want = (buf.len() - done).min(32 << 20);
        // SAFETY: getrandom writes at most `want` bytes into the live buffer from `done`.
        let n = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), want, 0) };
        if n <= 0 {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            for (i, b) in buf[done..].iter_mut().enumerate() {
                *b = (t >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(37);
            }
            return;
        }
        done += n as usize;
    }
}

/// This thread's CPU time (user, system).
pub(crate) fn thread_cpu() -> (Duration, Duration) {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a live rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (d(ru.ru_utime), d(ru.ru_stime))
}

/// CPU percent (total, user, system) of this thread since `t0`/`c0`, as iperf3 computes its own.
fn cpu_util(t0: Instant, c0: (Duration, Duration)) -> [f64; 3] {
    let wall = t0.elapsed().as_secs_f64();
    let (u, s) = thread_cpu();
    let pct = |d: Duration| {
        if wall > 0.0 {
            100.0 * d.as_secs_f64() / wall
        } else {
            0.0
        }
    };
    let (u, s) = (pct(u.saturating_sub(c0.0)), pct(s.saturating_sub(c0.1)));
    [u + s, u, s]
}

/// Runs one iperf3 test against the server at `addr`: the whole control sequence and the data
/// phase, every wait bounded by `p.timeout`.
pub fn run_test(addr: SocketAddr, p: &TestParams) -> Result<TestOutcome, Iperf3Error> {
    p.check()?;
    let cookie = new_cookie();
    let mut ctl = Control::connect(addr, p.timeout)?;
    let (t0, c0) = (Instant::now(), thread_cpu());
    ctl.send(&cookie, "sending the cookie")?;
    ctl.expect(
        State::ParamExchange,
        "PARAM_EXCHANGE (the server's answer to the cookie)",
    )?;
    let params = wire::params_json(p.udp, p.len, p.bound, p.reverse, p.udp_rate_bps);
    ctl.send(&wire::frame(&params), "sending the test parameters")?;
    ctl.expect(
        State::CreateStreams,
        "CREATE_STREAMS (the server's answer to the parameters)",
    )?;
    let conn = DataConn::open(addr, &cookie, p)?;
    ctl.expect(
        State::TestStart,
        "TEST_START (the server accepting the data connection)",
    )?;
    ctl.expect(State::TestRunning, "TEST_RUNNING")?;
    let m = data::run(&conn, p)?;
    let test_end_sent = Instant::now();
    ctl.send(&[State::TestEnd.to_byte()], "sending TEST_END")?;
    ctl.expect(
        State::ExchangeResults,
        "EXCHANGE_RESULTS (the server's answer to TEST_END)",
    )?;
    let cpu = cpu_util(t0, c0);
    let ours = wire::client_results_json(!p.reverse, cpu, &m.result());
    ctl.send(&wire::frame(&ours), "sending the client's results")?;
    let theirs = ctl.read_frame("the server's results JSON")?;
    let server = ServerReport::parse(&theirs).map_err(Iperf3Error::BadResults)?;
    ctl.expect(State::DisplayResults, "DISPLAY_RESULTS")?;
    ctl.send(&[State::IperfDone.to_byte()], "sending IPERF_DONE")?;
    drop(conn);
    Ok(TestOutcome {
        client: ClientMeasure { cpu_util: cpu, ..m },
        server,
        test_end_sent,
    })
}
