//! `netsweep rpm HOST|URL`: the responsiveness test ([`netsweep_rpm::client`]), its progress
//! on stderr, its table (or JSON) on stdout and its results file written (fsynced) at the
//! end; a failed write fails the command (exit 1).

use crate::cli::RpmArgs;
use crate::error::{Error, Result};
use netsweep_atomic::write_atomic;
use netsweep_model::rpm::Params;
use netsweep_model::time;
use netsweep_rpm::client::{self, Options, Report};
use netsweep_transport::tls::trust::{client_config, Trust};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

/// Runs the test and reports it.
pub fn main(a: RpmArgs) -> Result {
    let trust = match (&a.tls_pin, a.insecure) {
        (Some(fp), _) => Trust::Pin(fp.clone()),
        (None, true) => Trust::Insecure,
        (None, false) => Trust::System,
    };
    let interval_ms = a.interval.as_millis() as u64;
    if !(100..=10_000).contains(&interval_ms) {
        return Err(Error::usage(format!(
            "--interval {interval_ms} ms: give 100 ms to 10 s (the draft's is 1 s)"
        )));
    }
    let max_intervals = (a.max_time.as_millis() as u64 / interval_ms) as usize;
    let params = Params {
        interval_ms,
        max_connections: a.max_connections.into(),
        max_intervals,
        ..Params::default()
    };
    if max_intervals < 2 * params.mad {
        return Err(Error::usage(format!(
            "--max-time {:?} is {max_intervals} intervals of {interval_ms} ms: the test needs \
             at least {} (goodput, then responsiveness, each judged over {} intervals)",
            a.max_time,
            2 * params.mad,
            params.mad
        )));
    }
    let lab = super::run::lab_meta(a.lab_meta.as_deref())?;
    let tls = client_config(&trust).map_err(Error::usage)?;
    let opts = Options {
        params,
        tls,
        trust: trust.label(),
        timeout: a.timeout,
        progress: !a.quiet && !a.openmetrics,
        download: !a.upload_only,
        upload: !a.download_only,
    };
    let now = SystemTime::now();
    let mut r = client::run(&a.target, &opts).map_err(Error::failed)?;
    r.lab = lab;
    let json = serde_json::to_string_pretty(&r).expect("results serialise");
    let path = (!a.no_save).then(|| {
        a.output.map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from("netsweep-results").join(format!("{}-rpm.json", time::compact(now)))
        })
    });
    if let Some(path) = &path {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        write_atomic(path, &json)
            .map_err(|e| Error::failed(format!("cannot write {}: {e}", path.display())))?;
    }
    if a.openmetrics {
        print!("{}", r.openmetrics());
    } else if !a.quiet {
        if a.json {
            println!("{json}");
        } else {
            print!("{}", r.render());
            if let Some(path) = &path {
                println!("results: {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
