//! The namespace's kernel counters around a trial (netsweep-model's `kernel`: a chosen set of
//! /proc/net/snmp and /proc/net/netstat fields), read by the data thread before and after
//! each timed trial on each side.

pub use netsweep_model::kernel::{add, Snapshot, FIELDS};

/// Reads the calling thread's namespace counters; `None` when /proc cannot be read.
pub fn read() -> Option<Snapshot> {
    let [snmp, netstat] = netsweep_model::kernel::PATHS;
    let snmp = std::fs::read_to_string(snmp).ok()?;
    let netstat = std::fs::read_to_string(netstat).unwrap_or_default();
    Some(netsweep_model::kernel::parse(&[&snmp, &netstat]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_hosts_proc_reads() {
        let s = super::read().expect("/proc/thread-self/net/snmp");
        assert!(!s.is_empty());
    }
}
