//! The server's plan of a session, fed a client's hello setup and trials with hostile values:
//! `Plan::new` then `check_trial`, against the default limits and every operator policy. The
//! oracle is the budget: a plan that is admitted never costs more memory than the per-session
//! limit, its buffers as the pattern sizes them fit in that cost, its flows, size and timeout
//! are within the limits; an admitted trial is within the plan's largest message and the
//! server's trial limits. Input: one byte of policy bits (bit 6: the client is on another
//! host), then the setup as JSON on the first line and one trial per further line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netsweep_engine::server::plan::{Peer, Plan, Policy};
use netsweep_engine::server::ServerLimits;
use netsweep_proto::messages::{SessionSetup, TrialSpec};
use std::net::{IpAddr, Ipv4Addr};

fuzz_target!(|data: &[u8]| {
    let Some((&bits, rest)) = data.split_first() else {
        return;
    };
    let mut lines = rest.split(|&b| b == b'\n');
    let Some(Ok(setup)) = lines.next().map(serde_json::from_slice::<SessionSetup>) else {
        return;
    };
    let policy = Policy {
        host_transports: bits & 1 != 0,
        raw_transports: bits & 2 != 0,
        tos: bits & 4 != 0,
        priority: bits & 8 != 0,
        any_cc: bits & 16 != 0,
        host_facts: bits & 32 != 0,
    };
    let local = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1));
    let ip = if bits & 64 != 0 {
        IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    };
    let limits = ServerLimits::default();
    let Ok(plan) = Plan::new(
        &setup,
        Peer { ip, local },
        &limits,
        &policy,
        &netsweep_transport::Registry,
    ) else {
        return;
    };
    assert!(plan.cost.memory <= limits.session_memory, "{plan:?}");
    assert!(
        (plan.reg.server_memory)(&plan.sizes) <= plan.cost.memory,
        "{plan:?}"
    );
    assert!(plan.max_size <= limits.max_size && plan.flows <= limits.max_flows);
    assert!(plan.timeout <= limits.max_timeout);
    for line in lines {
        let Ok(trial) = serde_json::from_slice::<TrialSpec>(line) else {
            continue;
        };
        if plan.check_trial(&trial, &limits).is_ok() {
            assert!(trial.size <= plan.max_size);
            assert!(trial.repetitions <= limits.max_repetitions);
            assert!(std::time::Duration::from_nanos(trial.duration_ns) <= limits.max_trial);
        }
    }
});
