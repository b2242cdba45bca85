//! `netsweep rpm`'s command line: the server, how its certificate is checked, the draft's
//! parameters that a user may change, and where the results go.

use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct RpmArgs {
    /// The server: HOST or HOST:PORT (IPv6: [ADDR]:PORT) of a `netsweep serve --rpm` (port
    /// 4043 unless given), or the https:// URL of any server's configuration document
    /// (`https://HOST/.well-known/nq`, the draft's `urls` JSON).
    #[arg(value_name = "HOST|URL")]
    pub target: String,

    /// Accept only the certificate with this SHA-256 fingerprint (as `netsweep serve` prints
    /// it, or `openssl x509 -fingerprint -sha256`), whatever its name and issuer. Default: a
    /// certificate for the host that the system's root certificates vouch for.
    #[arg(long, value_name = "FINGERPRINT", value_parser = netsweep_transport::tls::identity::parse_pin)]
    pub tls_pin: Option<String>,

    /// Accept any certificate (a test server's self-signed one); the results say so.
    #[arg(long, conflicts_with = "tls_pin")]
    pub insecure: bool,

    /// The longest each direction may take before it reports what it has (marked "out of
    /// time"); the draft's test stops earlier once goodput and responsiveness are stable.
    #[arg(long, default_value = "12s", value_name = "DURATION", value_parser = netsweep_model::time::parse_duration)]
    pub max_time: Duration,

    /// One interval [the draft's ID]: goodput and responsiveness are judged at the end of each.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = netsweep_model::time::parse_duration)]
    pub interval: Duration,

    /// Most load-generating connections [MNP].
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_connections: u16,

    /// Measure only the download direction.
    #[arg(long, conflicts_with = "upload_only")]
    pub download_only: bool,

    /// Measure only the upload direction.
    #[arg(long)]
    pub upload_only: bool,

    /// The longest one connect, TLS handshake or probe may take.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = netsweep_model::time::parse_duration)]
    pub timeout: Duration,

    /// Write the results (JSON, schema netsweep-rpm) to FILE, replaced whole (fsynced).
    /// Default: netsweep-results/<timestamp>-rpm.json.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,

    /// Print the results as JSON on stdout instead of the table.
    #[arg(long, conflicts_with = "openmetrics")]
    pub json: bool,

    /// Print the results as OpenMetrics on stdout instead of the table (what the exporter's
    /// pattern=rpm probe answers with).
    #[arg(long)]
    pub openmetrics: bool,

    /// Do not save netsweep-results/<timestamp>-rpm.json.
    #[arg(long, conflicts_with = "output")]
    pub no_save: bool,

    /// A JSON file describing the testbed, recorded as `lab` in the results (used by
    /// scenarios, whose claims read the path's rate, delay and queue from it).
    #[arg(long, value_name = "FILE")]
    pub lab_meta: Option<String>,

    /// Print nothing but errors (the file is still written); no progress lines.
    #[arg(short, long)]
    pub quiet: bool,
}
