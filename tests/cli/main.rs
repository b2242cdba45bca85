//! The `cli` test binary. The command line as a user meets it: colour and terminals, `--help` and the docs it points at, pipes, the progress line, the bench scripts and the Debian package.

use netsweep_testkit::exe as common;

mod bench_script;
mod colour;
mod deny;
mod docs;
mod mistakes;
mod package_deb;
mod pipes;
mod progress;
