//! Test helpers: move bytes between a client and a server machine in memory.

use crate::client::{Client, ClientEvent};
use crate::server::{Server, ServerEvent};

/// Moves queued bytes both ways until neither side has anything to send; returns the events
/// each side produced. Panics (failing the test) if either side reports an error.
pub(crate) fn pump(
    client: &mut Client,
    server: &mut Server,
) -> (Vec<ClientEvent>, Vec<ServerEvent>) {
    loop {
        let mut moved = false;
        if let Some(bytes) = client.poll_transmit() {
            server.handle_input(&bytes).expect("server input");
            moved = true;
        }
        if let Some(bytes) = server.poll_transmit() {
            client.handle_input(&bytes).expect("client input");
            moved = true;
        }
        if !moved {
            break;
        }
    }
    (
        std::iter::from_fn(|| client.poll_event()).collect(),
        std::iter::from_fn(|| server.poll_event()).collect(),
    )
}

/// Deterministic xorshift64 PRNG, so failures reproduce.
#[derive(Debug)]
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next_u64() as u8).collect()
    }
}
