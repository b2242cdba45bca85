//! A body of zeros in 16 KiB frames — `/large`'s on the server, an upload's on the client —
//! each frame counted when the connection asks for it (HTTP/2 asks for the next once it has
//! room, so the count leads the wire by at most a frame and the windows), ended by its size,
//! a stop flag (Ok: a short upload) or a deadline (an error: the client sees a reset stream,
//! not a short object it might take for complete).

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

/// The body.
pub struct Zeros {
    left: u64,
    chunk: Bytes,
    counter: Option<Arc<AtomicU64>>,
    stop: Option<Arc<AtomicBool>>,
    until: Option<Instant>,
    done: Arc<AtomicBool>,
}

impl Zeros {
    /// `left` bytes, counted into `counter` if given.
    pub fn new(left: u64, counter: Option<Arc<AtomicU64>>) -> Self {
        Self {
            left,
            chunk: Bytes::from(vec![0u8; 16 << 10]),
            counter,
            stop: None,
            until: None,
            done: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Ends (short, without error) once `stop` is set.
    pub fn stopped_by(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Fails at `until`.
    pub fn until(mut self, until: Instant) -> Self {
        self.until = Some(until);
        self
    }

    /// Set once the last frame was taken.
    pub fn done(&self) -> Arc<AtomicBool> {
        self.done.clone()
    }
}

impl Body for Zeros {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if self.left == 0
            || self
                .stop
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            self.done.store(true, Ordering::SeqCst);
            return Poll::Ready(None);
        }
        if self.until.is_some_and(|t| Instant::now() >= t) {
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the connection reached the server's --max-duration",
            ))));
        }
        let n = self.left.min(self.chunk.len() as u64) as usize;
        self.left -= n as u64;
        if self.left == 0 {
            // The last frame: HTTP/2 sees `is_end_stream` and asks no more.
            self.done.store(true, Ordering::SeqCst);
        }
        if let Some(c) = &self.counter {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        match self.stop {
            Some(_) => SizeHint::default(),
            None => SizeHint::with_exact(self.left),
        }
    }
}
