//! Where both data threads ran over a point's timed trials: on small machines placement can
//! dominate latency (same CPU: no cross-CPU wake-up), so it is recorded with the point.

use serde::{Deserialize, Serialize};

/// CPU placement of both data threads over a point's timed trials. On small machines
/// placement can dominate latency (same CPU: no cross-CPU wake-up), so it is recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Placement {
    /// Distinct CPUs the client's data thread was seen on (at trial starts and ends).
    pub client_cpus: Vec<u32>,
    /// Distinct CPUs the server's data thread was seen on.
    pub server_cpus: Vec<u32>,
    /// Trials that started with both ends on the same CPU.
    pub same_cpu_trials: u32,
    /// Trials whose placement was observed on both ends.
    pub observed_trials: u32,
    /// Times the scheduler moved either data thread between CPUs during the timed trials.
    pub migrations: u64,
}

impl Placement {
    /// Adds one trial's observations.
    pub fn observe(&mut self, client: [Option<u32>; 2], server: [Option<u32>; 2], migrations: u64) {
        self.migrations += migrations;
        for c in client.into_iter().flatten() {
            if !self.client_cpus.contains(&c) {
                self.client_cpus.push(c);
            }
        }
        for c in server.into_iter().flatten() {
            if !self.server_cpus.contains(&c) {
                self.server_cpus.push(c);
            }
        }
        if let (Some(a), Some(b)) = (client[0], server[0]) {
            self.observed_trials += 1;
            if a == b {
                self.same_cpu_trials += 1;
            }
        }
    }

    /// True when some trials shared a CPU and others did not, or a thread moved mid-trial.
    pub fn mixed(&self) -> bool {
        (self.same_cpu_trials > 0 && self.same_cpu_trials < self.observed_trials)
            || self.migrations > 0
    }
}
