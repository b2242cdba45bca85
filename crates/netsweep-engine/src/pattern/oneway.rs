//! `--one-way`: each direction of a pingpong's round trip by its delay, from the two ends'
//! wall clocks (iperf2's `--trip-times`, irtt): the client stamps its send into each request,
//! the server its first receive and its echo's send into the echo, and the client, with its
//! own first receive of the echo, has all four times of every round trip. The delays are true
//! only if the clocks agree; the round trip with the least delay also bounds their offset
//! (NTP's estimate), which the results carry beside them.

use netsweep_model::symmetry::{Delay, OneWay};
use netsweep_proto::stamps::{self, Stamp};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A wall clock read once, so later times come from the monotonic clock already read (one
/// more clock read per message would be on the timed path).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WallClock {
    mono: Instant,
    wall_ns: i64,
}

/// The widest monotonic window a wall-clock read may fall in for [`WallClock::now`] to
/// take it at once: a thread preempted between the two reads (a loaded machine) would shift
/// every stamp of the trial by the time it was away.
const PAIR_WINDOW_NS: u128 = 2_000;

impl WallClock {
    /// Now, on both clocks: the wall clock read between two monotonic reads, paired with
    /// their midpoint; read again (at most 16 times) while the two lie more than
    /// [`PAIR_WINDOW_NS`] apart, and the tightest pair is kept.
    pub(crate) fn now() -> Self {
        let wall_now = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64)
        };
        let mut best: Option<(u128, Self)> = None;
        for _ in 0..16 {
            let before = Instant::now();
            let wall = wall_now();
            let after = Instant::now();
            let width = after.saturating_duration_since(before).as_nanos();
            let pair = Self {
                mono: before + after.saturating_duration_since(before) / 2,
                wall_ns: wall,
            };
            if best.as_ref().is_none_or(|(w, _)| width < *w) {
                best = Some((width, pair));
            }
            if width <= PAIR_WINDOW_NS {
                break;
            }
        }
        best.map_or_else(
            || Self {
                mono: Instant::now(),
                wall_ns: wall_now(),
            },
            |(_, p)| p,
        )
    }

    /// The wall-clock time of `t` (a trial's drift between the two clocks is parts per
    /// million: nanoseconds over milliseconds).
    #[inline]
    pub(crate) fn at(&self, t: Instant) -> i64 {
        self.wall_ns
            .saturating_add(t.saturating_duration_since(self.mono).as_nanos() as i64)
    }
}

/// What a request carries in the server's slots until the server writes them: an echo that
/// still holds it came from a server that does not stamp.
pub(crate) const UNSTAMPED: i64 = i64::MIN;

/// Prepares a request: the client's send time, and the server's slots marked unstamped.
#[inline]
pub(crate) fn stamp_request(msg: &mut [u8], base: usize, sent: i64) {
    stamps::write(msg, base, Stamp::ClientSend, sent);
    stamps::write(msg, base, Stamp::ServerReceive, UNSTAMPED);
    stamps::write(msg, base, Stamp::ServerSend, UNSTAMPED);
}

/// The server's side: its first receive of the request and its send of the echo.
#[inline]
pub(crate) fn stamp_echo(msg: &mut [u8], base: usize, received: i64, sent: i64) {
    stamps::write(msg, base, Stamp::ServerReceive, received);
    stamps::write(msg, base, Stamp::ServerSend, sent);
}

/// The one-way delays of a point's (or a trial's) round trips.
#[derive(Debug, Clone, Default)]
pub(crate) struct OneWayTally {
    messages: u64,
    /// Echoes the server did not stamp.
    pub(crate) unstamped: u64,
    to_server_min: i64,
    to_client_min: i64,
    to_server_sum: i128,
    to_client_sum: i128,
    /// The round trip with the least path delay (to server + to client): its two delays.
    best: Option<(i64, i64)>,
}

impl OneWayTally {
    /// Records one round trip from its echo and the client's first receive of it.
    #[inline]
    pub(crate) fn record(&mut self, echo: &[u8], base: usize, received: i64) {
        let sent = stamps::read(echo, base, Stamp::ClientSend);
        let (t2, t3) = (
            stamps::read(echo, base, Stamp::ServerReceive),
            stamps::read(echo, base, Stamp::ServerSend),
        );
        if t2 == UNSTAMPED || t3 == UNSTAMPED {
            self.unstamped += 1;
            return;
        }
        let up = t2.saturating_sub(sent);
        let down = received.saturating_sub(t3);
        self.merge(&OneWayTally {
            messages: 1,
            unstamped: 0,
            to_server_min: up,
            to_client_min: down,
            to_server_sum: i128::from(up),
            to_client_sum: i128::from(down),
            best: Some((up, down)),
        });
    }

    /// Adds a trial's tally (or one round trip's).
    pub(crate) fn merge(&mut self, o: &OneWayTally) {
        self.unstamped += o.unstamped;
        if o.messages == 0 {
            return;
        }
        if self.messages == 0 {
            (self.to_server_min, self.to_client_min) = (o.to_server_min, o.to_client_min);
        }
        self.messages += o.messages;
        self.to_server_min = self.to_server_min.min(o.to_server_min);
        self.to_client_min = self.to_client_min.min(o.to_client_min);
        self.to_server_sum += o.to_server_sum;
        self.to_client_sum += o.to_client_sum;
        let path = |(u, d): (i64, i64)| i128::from(u) + i128::from(d);
        if let Some(b) = o.best {
            if self.best.is_none_or(|s| path(b) < path(s)) {
                self.best = Some(b);
            }
        }
    }

    /// What a `--one-way` point of `size`-byte messages with stamps from `base` says when
    /// it has no delays, or some echoes came back without them.
    pub(crate) fn note(&self, size: u64, base: usize) -> Option<String> {
        let least = base + stamps::STAMPS_LEN;
        if size < least as u64 {
            Some(format!(
                "no one-way delays: --one-way needs messages of at least {least} B"
            ))
        } else if self.unstamped > 0 {
            Some(format!(
                "{} echoes came back unstamped: the server predates --one-way for this \
                 pattern (upgrade netsweep there)",
                self.unstamped
            ))
        } else {
            None
        }
    }

    /// The point's figures; `None` without a stamped round trip.
    pub(crate) fn figures(&self) -> Option<OneWay> {
        let (up, down) = self.best?;
        let n = self.messages as f64;
        Some(OneWay {
            to_server_ns: Delay {
                min: self.to_server_min as f64,
                mean: self.to_server_sum as f64 / n,
            },
            to_client_ns: Delay {
                min: self.to_client_min as f64,
                mean: self.to_client_sum as f64 / n,
            },
            messages: self.messages,
            // NTP: with delays d↑, d↓ and offset θ (server − client), up = d↑ + θ and
            // down = d↓ − θ, so θ = (up − down)/2 − (d↑ − d↓)/2, and |d↑ − d↓| ≤ d↑ + d↓.
            clock_offset_ns: (up as f64 - down as f64) / 2.0,
            clock_offset_bound_ns: (up as f64 + down as f64) / 2.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(sent: i64, t2: i64, t3: i64) -> Vec<u8> {
        let mut m = vec![0u8; 40];
        stamp_request(&mut m, 8, sent);
        stamp_echo(&mut m, 8, t2, t3);
        m
    }

    #[test]
    fn delays_come_from_the_four_times_and_the_best_round_trip_bounds_the_offset() {
        // The server's clock 5 ms ahead; 10 ms up, 1 ms down, 20 µs in the server.
        let ms = 1_000_000i64;
        let mut a = OneWayTally::default();
        for (k, extra) in [(0i64, 0i64), (1, 3 * ms), (2, ms)] {
            let sent = k * 100 * ms;
            let t2 = sent + 10 * ms + extra + 5 * ms;
            let t3 = t2 + 20_000;
            a.record(&echo(sent, t2, t3), 8, t3 - 5 * ms + ms);
        }
        let mut unstamped = vec![0u8; 40];
        stamp_request(&mut unstamped, 8, 0);
        a.record(&unstamped, 8, 7);
        let mut point = OneWayTally::default();
        point.merge(&a);
        point.merge(&OneWayTally::default());
        let f = point.figures().unwrap();
        assert_eq!((f.messages, point.unstamped), (3, 1));
        // Read with the clocks as they are: 15 ms up (10 + the offset), −4 ms down.
        assert_eq!(f.to_server_ns.min, 15e6);
        assert_eq!(f.to_server_ns.mean, 15e6 + 4e6 / 3.0);
        assert_eq!((f.to_client_ns.min, f.to_client_ns.mean), (-4e6, -4e6));
        // The offset estimate is 5 ms + (10 − 1)/2 ms; the true 5 ms lies within its bound.
        assert_eq!(f.clock_offset_ns, 9.5e6);
        assert_eq!(f.clock_offset_bound_ns, 5.5e6);
        assert!((f.clock_offset_ns - 5e6).abs() <= f.clock_offset_bound_ns);
        assert!(OneWayTally::default().figures().is_none());
    }

    #[test]
    fn a_wall_clock_anchor_reads_the_system_clock_through_the_monotonic_one() {
        let c = WallClock::now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as i64;
        let later = c.at(Instant::now());
        // Read in that order: the anchor's time for the later instant is not before the
        // system clock's (beyond the pair's window), and not far after it.
        assert!(later >= wall - 1_000_000, "{later} vs {wall}");
        assert!(later - wall < 100_000_000, "{later} vs {wall}");
    }
}
