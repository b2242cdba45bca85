//! The `lab` test binary. Tests that need the machine to themselves: every test that builds a lab (network namespaces, shaped and emulated links, the seed scenarios, anomaly bands) and the clean loopback sweep whose verdict needs an idle host. Each holds the machine-wide lab lock exclusively, so they run one at a time whatever `--test-threads` says; the few quick checks here that build nothing (scenario parsing) run beside them.

use netsweep_testkit::exe as common;

mod anomaly_clean;
mod anomaly_lab;
mod aqm;
mod background;
mod directions;
mod emulator;
mod experiments;
mod netns_remote;
mod one_way;
mod paths;
mod probe_shaped;
mod rate_lab;
mod rpm_lab;
mod scenarios;
mod seeds;
mod send_errors;
mod timeline_lab;
