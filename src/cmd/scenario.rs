//! `netsweep scenario`: check an experiment file, run it across its lab (every cell's
//! repetitions interleaved), then summarise each run, evaluate the claims and write the page;
//! `scenario page` rewrites a results directory's page, figures and verdicts; `scenario pack`
//! packs its run files into one.

use crate::cli::{ScenarioArgs, ScenarioCommand};
use crate::error::{Error, Result};
use experiment::{cell_facts, check_claims, write_page, Written};
use netsweep_atomic::write_atomic;
use netsweep_lab::runner::ScenarioRunOutcome;
use netsweep_lab::{preflight, run_scenario, Progress, Scenario};
use netsweep_model::experiment::Outcome;
use netsweep_model::results;
use netsweep_model::time;
use netsweep_report::scenario as scenario_table;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::SystemTime;

mod bundle;
mod experiment;

/// Carries out the scenario subcommand.
pub fn main(a: ScenarioArgs) -> Result {
    match a.command {
        ScenarioCommand::Check { file } => {
            let s = Scenario::load(Path::new(&file))?;
            // Each run's arguments must be a valid `netsweep run` too, and every claim must
            // resolve to a size and a figure its cells measure.
            cell_facts(&s)
                .and_then(|f| check_claims(&s, &f))
                .map_err(|e| Error::usage(format!("{file}: {e}")))?;
            crate::signal::quiet_broken_pipe();
            println!(
                "{file}: scenario {:?} with {} runs is valid: {} cells × {} repetitions, {} claims, {} figures",
                s.name,
                s.runs.len(),
                s.design.cells.len(),
                s.design.repeat,
                s.claims.len(),
                s.figures.len()
            );
            Ok(ExitCode::SUCCESS)
        }
        ScenarioCommand::Run {
            file,
            output,
            check,
        } => run(&file, output, check),
        ScenarioCommand::Page { dir, check } => page(&dir, check),
        ScenarioCommand::Pack { dir } => pack(&dir),
    }
}

/// The scenario a results directory keeps, or a usage error that says what to give.
fn kept_scenario(dir: &str) -> Result<Scenario> {
    Scenario::load(&Path::new(dir).join("scenario.toml")).map_err(|e| {
        Error::usage(format!(
            "{dir} holds no readable scenario.toml ({e}): give a directory `netsweep scenario run` wrote"
        ))
    })
}

/// `scenario pack DIR`: DIR's run files into its bundle.
fn pack(dir: &str) -> Result {
    let scenario = kept_scenario(dir)?;
    let names: Vec<String> = experiment::run_files(&scenario)
        .into_iter()
        .map(|(_, _, n)| n)
        .collect();
    let (packed, bytes) = bundle::pack(Path::new(dir), &names).map_err(Error::Failed)?;
    crate::signal::quiet_broken_pipe();
    println!(
        "{dir}: {packed} results files packed into {} ({:.1} MB); `netsweep scenario page {dir}` reads them from it",
        bundle::BUNDLE,
        bytes as f64 / 1e6
    );
    Ok(ExitCode::SUCCESS)
}

/// `scenario page DIR`: the page, figures and verdicts again, from DIR's results.
fn page(dir: &str, check: bool) -> Result {
    let d = Path::new(dir);
    let scenario = kept_scenario(dir)?;
    let failures = failures_in_index(d);
    let written = write_page(d, &scenario, &failures).map_err(Error::Failed)?;
    // The index's verdicts follow the page.
    let index = d.join("index.json");
    if let Some(mut v) = std::fs::read_to_string(&index)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    {
        v["verdicts"] = serde_json::to_value(&written.verdicts).unwrap_or_default();
        let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        write_atomic(&index, &text)
            .map_err(|e| Error::failed(format!("cannot write {}: {e}", index.display())))?;
    }
    crate::signal::quiet_broken_pipe();
    print_written(&written);
    if check
        && written
            .verdicts
            .iter()
            .any(|v| matches!(v.outcome, Outcome::Fails | Outcome::Invalid))
    {
        return Err(Error::failed(
            "--check: a claim fails or is invalid (see the verdicts above)",
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs that did not succeed, from a results directory's index: (name, status: message).
fn failures_in_index(dir: &Path) -> Vec<(String, String)> {
    let Some(v) = std::fs::read_to_string(dir.join("index.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    else {
        return Vec::new();
    };
    v["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] != "ok")
        .map(|r| {
            (
                r["name"].as_str().unwrap_or("?").to_string(),
                format!(
                    "{}: {}",
                    r["status"].as_str().unwrap_or("?"),
                    r["message"].as_str().unwrap_or("")
                ),
            )
        })
        .collect()
}

/// The cells, the verdicts and the files, for the terminal.
fn print_written(w: &Written) {
    if !w.cells.is_empty() {
        println!("\ncells (over their repetitions):");
        for c in &w.cells {
            println!("  {c}");
        }
    }
    if !w.verdicts.is_empty() {
        println!("\nclaims:");
        for (i, v) in w.verdicts.iter().enumerate() {
            println!("  {}. {:<9} {}", i + 1, v.outcome.name(), v.check);
            if let Some(s) = &v.says {
                println!("     {s}");
            }
            println!("     {}", v.reason);
        }
    }
    println!(
        "\npage: {} ({} figure files)",
        w.page.display(),
        w.figures.len()
    );
}

/// A scenario with mpi runs needs this binary built with the mpi feature, and mpirun.
fn mpi_ready(scenario: &Scenario) -> std::result::Result<(), String> {
    let Some(r) = scenario
        .runs
        .iter()
        .find(|r| netsweep_lab::mpi_launch::is_mpi(&r.args))
    else {
        return Ok(());
    };
    if !cfg!(feature = "mpi") {
        return Err(format!(
            "run \"{}\" uses --transport mpi, which this netsweep was built without: \
             build it with `cargo build --release --features mpi` (Open MPI and libclang: \
             apt-get install openmpi-bin libopenmpi-dev libclang-dev)",
            r.name
        ));
    }
    netsweep_lab::cmd::find_tool("mpirun")
        .map(drop)
        .ok_or_else(|| {
            format!(
                "run \"{}\" uses --transport mpi, and mpirun is not installed: apt-get install \
             openmpi-bin",
                r.name
            )
        })
}

/// `scenario run FILE`: the lab, every run, the summaries, the claims and the page.
fn run(file: &str, output: Option<String>, check: bool) -> Result {
    let scenario = Scenario::load(Path::new(file))?;
    cell_facts(&scenario)
        .and_then(|f| check_claims(&scenario, &f))
        .map_err(|e| Error::usage(format!("{file}: {e}")))?;
    mpi_ready(&scenario).map_err(|e| Error::usage(format!("{file}: {e}")))?;
    preflight()?;
    let exe = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find the netsweep binary: {e}")))?;
    let out = PathBuf::from(output.unwrap_or_else(|| {
        format!(
            "netsweep-results/{}-{}",
            time::compact(SystemTime::now()),
            scenario.name
        )
    }));
    // The scenario beside its results, so the page can be written again from them alone.
    if std::fs::create_dir_all(&out).is_ok() {
        let kept = out.join("scenario.toml");
        write_atomic(&kept, &scenario.self_contained())
            .map_err(|e| Error::failed(format!("cannot write {}: {e}", kept.display())))?;
    }
    let mut bar = crate::output::progress::ProgressLine::new(std::io::stderr().is_terminal());
    let outcome = run_scenario(&scenario, &exe, &out, |p| match p {
        Progress::LabUp(layout) => eprintln!("{layout}"),
        Progress::RunStarting {
            index,
            total,
            run,
            target,
            ..
        } => {
            bar.clear();
            if *index == 0 {
                bar.start(*total);
            }
            eprintln!(
                "[{}/{}] {}: {} → {} ({target})",
                index + 1,
                total,
                run.name,
                run.client,
                run.server
            );
            bar.step(*index, &format!("running {}", run.name));
        }
        Progress::RunFinished { outcome, .. } => {
            bar.clear();
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
        Progress::LabDown => {
            bar.clear();
            eprintln!("lab removed")
        }
    });
    bar.clear();
    let mut outcome = outcome?;
    // The reader's view of the experiment, beside its results: every run overlaid.
    let visuals = write_visuals(&out, &outcome.runs);
    // Everything is saved: a closed stdout may now end the process quietly.
    crate::signal::quiet_broken_pipe();
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
    // The claims on the results, the figures of the factors and the page, together.
    let failures: Vec<(String, String)> = outcome
        .runs
        .iter()
        .filter(|r| r.status != netsweep_lab::ScenarioRunStatus::Ok)
        .map(|r| {
            (
                r.name.clone(),
                format!("{:?}: {}", r.status, r.message.as_deref().unwrap_or("")),
            )
        })
        .collect();
    let written = write_page(&out, &scenario, &failures);
    match &written {
        Ok(w) => {
            outcome.verdicts = w.verdicts.clone();
            outcome.write_index().map_err(Error::failed)?;
            print_written(w);
        }
        Err(e) => eprintln!("netsweep: the page could not be written: {e}"),
    }
    println!("index: {}", outcome.index_path().display());
    match visuals {
        Ok(Some(html)) => println!("report: {}", html.display()),
        Ok(None) => {}
        Err(e) => return Err(Error::Failed(e)),
    }
    let code = outcome.exit_code();
    if code == 0 && written.is_err() {
        return Err(Error::failed("the page could not be written (see above)"));
    }
    if code == 0 && check && outcome.a_claim_fails() {
        return Err(Error::failed(
            "--check: a claim fails (see the verdicts above)",
        ));
    }
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// Writes `report.html` (every run overlaid) and `plots/*.svg` into the scenario's output
/// directory; `None` when no run left a results file.
fn write_visuals(out: &Path, runs: &[ScenarioRunOutcome]) -> Result<Option<PathBuf>, String> {
    let loaded: Vec<(String, results::RunResult)> = runs
        .iter()
        .filter_map(|r| load(&out.join(&r.results)).map(|run| (r.name.clone(), run)))
        .collect();
    if loaded.is_empty() {
        return Ok(None);
    }
    let named: Vec<_> = loaded
        .iter()
        .map(|(name, run)| netsweep_report::legend::Named::new(name, run))
        .collect();
    let html = out.join("report.html");
    write_atomic(&html, &netsweep_report::html::page(&named))
        .map_err(|e| format!("cannot write {}: {e}", html.display()))?;
    let plots = out.join("plots");
    crate::cmd::report::write_plots(&named, plots.to_str(), None)
        .map_err(|_| format!("cannot write the plots into {}", plots.display()))?;
    Ok(Some(html))
}

fn load(path: &Path) -> Option<results::RunResult> {
    results::load(&std::fs::read_to_string(path).ok()?).ok()
}

/// One line per run: its headline figures.
fn summary(path: &Path) -> String {
    load(path).map_or_else(|| "no results".into(), |r| scenario_table::run_line(&r))
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
    scenario_table::table(&loaded)
}
