//! `netsweep exporter`'s command line: where it listens and how it bounds its probes.

use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Address and port of the HTTP server (127.0.0.1 by default: give 0.0.0.0:9469 for a
    /// Prometheus on another host).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9469")]
    pub listen: String,

    /// Most probes running at once; a probe beyond is answered netsweep_probe_success 0 with
    /// reason "busy" (HTTP 200, so Prometheus keeps the target up) and counted as busy in
    /// /metrics. Each probe is a short `netsweep run` that loads the path it measures.
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_probes: u32,

    /// How long a probe's result is served again to the same request, e.g. 30s (a bare
    /// number is seconds): Prometheus scraping every second then measures the path once per
    /// period, not every second.
    #[arg(long, value_name = "TIME", default_value = "15s", value_parser = crate::cli::parse::duration)]
    pub cache: Duration,

    /// Longest `duration` a probe may ask for (default 10s).
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = crate::cli::parse::duration)]
    pub max_duration: Duration,
}
