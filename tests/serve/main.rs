//! The `serve` test binary. `netsweep serve` as a daemon left on a network: authentication, hostile peers and values, limits and budgets, many clients, session lifecycles, the responsiveness port, arming, an old server, and the Prometheus exporter.

use netsweep_testkit::exe as common;

mod allow_from;
mod arming;
mod auth;
mod exporter;
mod exporter_proxy;
mod hostile;
mod limits;
mod many;
mod metrics;
mod old_server;
mod probe_deadline;
mod rpm;
mod sessions;
