//! The `iperf3` test binary. netsweep and iperf3 in both roles: a sweep against an unmodified `iperf3 -s` (`run.rs`), and `netsweep serve --iperf3` against Debian's `iperf3 -c` on loopback (`serve.rs`) and across lab links (`serve_lab.rs`). Every test that is not a lab test holds the lab lock shared, so none runs beside a lab test.

use netsweep_testkit::exe as common;

mod dual_stack;
mod refusal_reasons;
mod run;
mod serve;
mod serve_lab;
mod window;
