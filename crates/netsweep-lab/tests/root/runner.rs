//! Root tests of the scenario runner with a stand-in netsweep binary (examples/fake_netsweep):
//! servers start in the server host, clients reach the chosen address (direct, routed, VXLAN),
//! results, logs, lab.json and index.json land in the output directory, failures and timeouts
//! are recorded, and the lab is torn down on success, failure and interruption.

use crate::common::*;
use netsweep_lab::{signals, Progress, RunOptions, Scenario, ScenarioRunStatus};
use netsweep_testkit::lab::run_id;
use std::time::{Duration, Instant};

const SCENARIO: &str = r#"
name = "runner-test"
[topology]
[[topology.hosts]]
name = "client"
[[topology.hosts]]
name = "router"
router = true
[[topology.hosts]]
name = "server"
[[topology.links]]
name = "direct"
a = "client"
b = "server"
[[topology.links]]
a = "client"
b = "router"
[[topology.links]]
a = "router"
b = "server"
[[topology.tunnels]]
name = "vx"
a = "client"
b = "server"
via = ["router"]

[[run]]
name = "direct"
client = "client"
server = "server"
args = ["--transport", "tcp"]

[[run]]
name = "routed"
client = "client"
server = "server"
via = "router-server"
port = 7300

[[run]]
name = "tunnel"
client = "client"
server = "server"
via = "vx"

[[run]]
name = "fails"
client = "client"
server = "server"
args = ["--fake-exit", "3"]

[[run]]
name = "slow"
client = "client"
server = "server"
timeout = 1
args = ["--fake-sleep", "30"]

[[compare]]
runs = ["direct", "tunnel"]
title = "direct vs vxlan"
"#;

fn read_json(p: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn scenario_runs_every_run_and_tears_down() {
    let _lock = setup("scenario_runs_every_run_and_tears_down");
    let exe = fake_exe();
    let out = std::env::temp_dir().join(format!("nsw-runner-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let s = Scenario::parse(SCENARIO).unwrap();
    let id = run_id("runner");
    let mut opts = RunOptions::new(&exe, &out);
    opts.run_id = Some(id.clone());
    let mut events = Vec::new();
    let o = netsweep_lab::run_scenario_with(&s, &opts, |p| {
        events.push(match p {
            Progress::LabUp(_) => "up".to_string(),
            Progress::RunStarting { run, .. } => format!("start {}", run.name),
            Progress::RunFinished { outcome, .. } => {
                format!("end {} {:?}", outcome.name, outcome.status)
            }
            Progress::LabDown => "down".to_string(),
        })
    })
    .unwrap();
    assert_eq!(events.first().map(String::as_str), Some("up"));
    assert_eq!(events.last().map(String::as_str), Some("down"));
    let status: Vec<(String, ScenarioRunStatus)> =
        o.runs.iter().map(|r| (r.name.clone(), r.status)).collect();
    assert_eq!(
        status,
        [
            ("direct".into(), ScenarioRunStatus::Ok),
            ("routed".into(), ScenarioRunStatus::Ok),
            ("tunnel".into(), ScenarioRunStatus::Ok),
            ("fails".into(), ScenarioRunStatus::Failed),
            ("slow".into(), ScenarioRunStatus::TimedOut),
        ]
    );
    assert_eq!(o.exit_code(), 1);
    assert!(o.teardown_errors.is_empty(), "{:?}", o.teardown_errors);
    assert_eq!(
        o.runs[0].target, "198.18.1.2:7200",
        "the direct link is the shortest path"
    );
    assert_eq!(o.runs[1].target, "198.18.3.2:7300");
    assert_eq!(o.runs[2].target, "198.19.1.2:7200");
    assert_eq!(o.runs[3].exit_code, Some(3));
    // Results written by the (fake) client, which reached its server and read lab.json.
    for name in ["direct", "routed", "tunnel"] {
        let r = read_json(&out.join(format!("{name}.json")));
        assert_eq!(r["connected"], true, "{name}: {r}");
        assert_eq!(r["lab_meta_readable"], true, "{name}: {r}");
        assert!(out.join(format!("{name}.log")).exists());
        assert!(out.join(format!("{name}.server.log")).exists());
    }
    let direct = read_json(&out.join("direct.json"));
    assert_eq!(direct["args"][1], "--transport");
    let lab = read_json(&out.join("lab.json"));
    assert_eq!(lab["schema"], "netsweep-lab");
    assert_eq!(lab["tunnels"][0]["mtu"], 1450);
    let index = read_json(&out.join("index.json"));
    assert_eq!(index["schema"], "netsweep-scenario-index");
    assert_eq!(index["runs"].as_array().unwrap().len(), 5);
    assert_eq!(index["runs"][4]["status"], "timed-out");
    assert_eq!(index["runs"][0]["results"], "direct.json");
    assert_eq!(index["compare"][0]["title"], "direct vs vxlan");
    assert!(index["finished_unix"].as_u64().is_some());
    assert!(
        namespaces_of(&id).is_empty(),
        "left {:?}",
        namespaces_of(&id)
    );
    let _ = std::fs::remove_dir_all(&out);
}

const SLOW: &str = r#"
[topology]
[[topology.hosts]]
name = "client"
[[topology.hosts]]
name = "server"
[[topology.links]]
a = "client"
b = "server"
[[run]]
name = "slow"
client = "client"
server = "server"
args = ["--fake-sleep", "60"]
[[run]]
name = "never"
client = "client"
server = "server"
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn an_interrupted_scenario_stops_its_children_and_tears_down() {
    let _lock = setup("an_interrupted_scenario_stops_its_children_and_tears_down");
    let exe = fake_exe();
    let out = std::env::temp_dir().join(format!("nsw-runner-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let s = Scenario::parse(SLOW).unwrap();
    let id = run_id("interrupt");
    let mut opts = RunOptions::new(&exe, &out);
    opts.run_id = Some(id.clone());
    let started = Instant::now();
    let o = netsweep_lab::run_scenario_with(&s, &opts, |p| {
        if let Progress::RunStarting { .. } = p {
            // Ctrl-C a moment after the client starts.
            std::thread::spawn(|| {
                std::thread::sleep(Duration::from_millis(800));
                signals::request_stop();
            });
        }
    })
    .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert!(o.interrupted);
    assert_eq!(o.exit_code(), 130);
    assert_eq!(o.runs[0].status, ScenarioRunStatus::Interrupted);
    assert_eq!(o.runs[1].status, ScenarioRunStatus::Skipped);
    assert!(
        namespaces_of(&id).is_empty(),
        "left {:?}",
        namespaces_of(&id)
    );
    let index = read_json(&out.join("index.json"));
    assert_eq!(index["interrupted"], true);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn sigterm_to_a_scenario_process_tears_its_lab_down() {
    let _lock = setup("sigterm_to_a_scenario_process_tears_its_lab_down");
    let exe = fake_exe();
    let dir = std::env::temp_dir().join(format!("nsw-runner-term-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("slow.toml");
    std::fs::write(&file, SLOW).unwrap();
    let id = run_id("sigterm");
    let mut child = std::process::Command::new(&exe)
        .arg("scenario")
        .arg(&file)
        .arg(dir.join("out"))
        .arg(&id)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        wait_for(Duration::from_secs(20), || dir
            .join("out")
            .join("slow.log")
            .exists()),
        "the scenario never started its run"
    );
    assert_eq!(namespaces_of(&id).len(), 2);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(130));
    assert!(
        namespaces_of(&id).is_empty(),
        "left {:?}",
        namespaces_of(&id)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
