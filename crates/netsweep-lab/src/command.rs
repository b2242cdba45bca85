//! What a scenario run's client host runs against the server host's `netsweep serve`:
//! `netsweep run` (the default) or, with `command = "rpm"`, `netsweep rpm` against
//! `serve --rpm`.

use serde::Serialize;
use toml::Spanned;

/// What a run's client host runs against the server host's `netsweep serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RunCommand {
    /// `netsweep run ADDR:PORT ARGS…` (the default).
    #[default]
    Run,
    /// `netsweep rpm ADDR:4043 ARGS…` against `serve --rpm` (`command = "rpm"`).
    Rpm,
}

/// The port `netsweep serve --rpm` answers responsiveness clients on in a scenario.
pub const RPM_PORT: u16 = 4043;

/// A run's `command`, checked against what it needs: one client, and a server that prints
/// its startup line (the certificate's fingerprint the client pins). Error: (field, byte
/// offset, message).
pub(crate) fn parse(
    command: Option<&Spanned<String>>,
    clients: u32,
    server_args: &[String],
) -> Result<RunCommand, (&'static str, usize, String)> {
    let Some(c) = command else {
        return Ok(RunCommand::Run);
    };
    let at = c.span().start;
    match c.get_ref().as_str() {
        "run" => Ok(RunCommand::Run),
        "rpm" if clients > 1 => Err((
            "command",
            at,
            "command = \"rpm\" runs one responsiveness test: drop `clients`".into(),
        )),
        "rpm" if server_args.iter().any(|a| a == "-q" || a == "--quiet") => Err((
            "server_args",
            at,
            "command = \"rpm\" pins the certificate the server's startup line names: drop -q"
                .into(),
        )),
        "rpm" => Ok(RunCommand::Rpm),
        other => Err((
            "command",
            at,
            format!(
                "command = \"{other}\": give \"run\" (netsweep run, the default) or \"rpm\" (netsweep rpm)"
            ),
        )),
    }
}
