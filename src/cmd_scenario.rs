//! `netsweep scenario`: run an experiment file across its lab, then summarise each run.

use crate::cli::{ScenarioArgs, ScenarioCommand};
use crate::cmd_lab::lab_failure;
use crate::time;
use netsweep_core::results;
use netsweep_lab::{preflight, run_scenario, Progress, Scenario};
use netsweep_report::units;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

pub fn main(a: ScenarioArgs) -> ExitCode {
    match a.command {
        ScenarioCommand::Check { file } => match Scenario::load(Path::new(&file)) {
            Ok(s) => {
                // Each run's arguments must be a valid `netsweep run` too.
                for r in &s.runs {
                    if let Err(e) = check_args(&r.args) {
                        return crate::usage_error(format!("{file}: run {:?}: {e}", r.name));
                    }
                }
                println!(
                    "{file}: scenario {:?} with {} runs is valid",
                    s.name,
                    s.runs.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => lab_failure(&e),
        },
        ScenarioCommand::Run { file, output } => run(&file, output),
    }
}

/// Parses a run's arguments as `netsweep run` would and builds its spec.
fn check_args(args: &[String]) -> Result<(), String> {
    use clap::Parser;
    let argv = ["netsweep", "run", "127.0.0.1"]
        .into_iter()
        .map(String::from)
        .chain(args.iter().cloned());
    // clap's message without its usage and help hints: the error line and, for a closed
    // set, the possible values.
    let cli = crate::cli::Cli::try_parse_from(argv).map_err(|e| {
        e.to_string()
            .lines()
            .map(str::trim)
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ")
    })?;
    match cli.command {
        Some(crate::cli::Command::Run(a)) => {
            let family = if a.ipv6 {
                netsweep_core::spec::Family::Ipv6
            } else {
                netsweep_core::spec::Family::Ipv4
            };
            crate::cmd_run::build_spec(&a, family).map(|_| ())
        }
        _ => Err("not a run".into()),
    }
}

fn run(file: &str, output: Option<String>) -> ExitCode {
    let scenario = match Scenario::load(Path::new(file)) {
        Ok(s) => s,
        Err(e) => return lab_failure(&e),
    };
    for r in &scenario.runs {
        if let Err(e) = check_args(&r.args) {
            return crate::usage_error(format!("{file}: run {:?}: {e}", r.name));
        }
    }
    if let Err(e) = preflight() {
        return lab_failure(&e);
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return crate::failure(format!("cannot find the netsweep binary: {e}")),
    };
    let out = PathBuf::from(output.unwrap_or_else(|| {
        format!(
            "netsweep-results/{}-{}",
            time::compact(SystemTime::now()),
            scenario.name
        )
    }));
    let outcome = run_scenario(&scenario, &exe, &out, |p| match p {
        Progress::LabUp(layout) => eprintln!("{layout}"),
        Progress::RunStarting {
            index,
            total,
            run,
            target,
            ..
        } => {
            eprintln!(
                "[{}/{}] {}: {} → {} ({target})",
                index + 1,
                total,
                run.name,
                run.client,
                run.server
            )
        }
        Progress::RunFinished { outcome, .. } => {
            eprintln!(
                "      {:?} in {:.1} s; log {}",
                outcome.status,
                outcome.duration_secs,
                out.join(&outcome.log).display()
            );
            if let Some(m) = &outcome.message {
                eprintln!("      {m}");
            }
        }
        Progress::LabDown => eprintln!("lab removed"),
    });
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return lab_failure(&e),
    };
    println!(
        "scenario {}: {} runs, results in {}",
        scenario.name,
        outcome.runs.len(),
        out.display()
    );
    for r in &outcome.runs {
        println!("  {:<24} {}", r.name, summary(&out.join(&r.results)));
    }
    for c in &outcome.compare {
        println!("\n{}", c.title.as_deref().unwrap_or("comparison"));
        println!("{}", side_by_side(&out, &c.runs, &outcome.runs));
    }
    println!("index: {}", outcome.index_path().display());
    ExitCode::from(outcome.exit_code().clamp(0, 255) as u8)
}

fn load(path: &Path) -> Option<results::RunResult> {
    results::load(&std::fs::read_to_string(path).ok()?).ok()
}

/// One line per run: its headline figures.
fn summary(path: &Path) -> String {
    let Some(r) = load(path) else {
        return "no results".into();
    };
    let s = r.summary.unwrap_or_default();
    let mut line = format!(
        "{} {} · peak {} Mbit/s at {}",
        r.spec.transport,
        r.spec.pattern,
        units::mbps(s.peak_mbps),
        units::size(s.peak_at_size)
    );
    if let Some(l) = s.min_latency_ns {
        line.push_str(&format!(" · min latency {} µs", units::us(l)));
    }
    let lost: u64 = r.points.iter().filter_map(|p| p.loss.map(|l| l.lost)).sum();
    let sent: u64 = r.points.iter().filter_map(|p| p.loss.map(|l| l.sent)).sum();
    if sent > 0 {
        line.push_str(&format!(" · loss {lost}/{sent}"));
    }
    line
}

/// Throughput per size of several runs, side by side.
fn side_by_side(out: &Path, names: &[String], runs: &[netsweep_lab::ScenarioRunOutcome]) -> String {
    let loaded: Vec<(String, Option<results::RunResult>)> = names
        .iter()
        .map(|n| {
            let r = runs
                .iter()
                .find(|r| &r.name == n)
                .and_then(|r| load(&out.join(&r.results)));
            (n.clone(), r)
        })
        .collect();
    let mut sizes: Vec<u64> = loaded
        .iter()
        .filter_map(|(_, r)| r.as_ref())
        .flat_map(|r| r.points.iter().map(|p| p.size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut s = format!("{:>9}", "bytes");
    for (n, _) in &loaded {
        s.push_str(&format!(" {:>18}", n));
    }
    s.push_str("   (Mbit/s)\n");
    for size in sizes {
        s.push_str(&format!("{size:>9}"));
        for (_, r) in &loaded {
            let v = r
                .as_ref()
                .and_then(|r| r.points.iter().find(|p| p.size == size))
                .map_or("-".to_string(), |p| units::mbps(p.throughput_mbps.mean));
            s.push_str(&format!(" {v:>18}"));
        }
        s.push('\n');
    }
    s
}
