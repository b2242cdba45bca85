//! Root tests of `clean()`: after a leaked lab, after a scenario process killed with SIGKILL
//! (its server still running inside), and with `nsw-` objects in the root namespace, nothing
//! named `nsw-` is left.

use crate::common::*;
use netsweep_lab::{clean, Lab, Topology};
use netsweep_testkit::lab::run_id;
use std::time::Duration;

const ROUTED: &str = r#"
[[hosts]]
name = "client"
[[hosts]]
name = "router"
router = true
[[hosts]]
name = "server"
[[links]]
a = "client"
b = "router"
loss = 0.1
[[links]]
a = "router"
b = "server"
rate = "10mbit"
[[tunnels]]
a = "client"
b = "server"
"#;

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn clean_removes_a_leaked_lab() {
    let _lock = setup("clean_removes_a_leaked_lab");
    let id = run_id("leak");
    let lab = Lab::up(&Topology::parse(ROUTED).unwrap(), &id).unwrap();
    let state = lab.state_file().unwrap().to_path_buf();
    std::mem::forget(lab);
    assert_eq!(namespaces_of(&id).len(), 3);
    let report = clean().unwrap();
    assert!(report.errors.is_empty(), "{report}");
    for h in ["client", "router", "server"] {
        let ns = format!("nsw-{id}-{h}");
        assert!(report.namespaces.contains(&ns), "{report}");
    }
    assert!(report.state_files.contains(&state), "{report}");
    assert!(leftovers().is_empty(), "left {:?}", leftovers());
    assert!(!state.exists());
    let again = clean().unwrap();
    assert!(again.is_empty(), "{again}");
    assert!(again.to_string().starts_with("nothing to clean"));
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn clean_after_kill_9_of_a_scenario_leaves_nothing() {
    let _lock = setup("clean_after_kill_9_of_a_scenario_leaves_nothing");
    let exe = fake_exe();
    let dir = std::env::temp_dir().join(format!("nsw-clean-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.toml");
    std::fs::write(
        &file,
        format!(
            "{}\n[[run]]\nname = \"slow\"\nclient = \"client\"\nserver = \"server\"\nargs = [\"--fake-sleep\", \"60\"]\n",
            ROUTED
                .replace("[[hosts]]", "[[topology.hosts]]")
                .replace("[[links]]", "[[topology.links]]")
                .replace("[[tunnels]]", "[[topology.tunnels]]")
        ),
    )
    .unwrap();
    let id = run_id("kill9");
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
    child.kill().unwrap(); // SIGKILL: no cleanup in the process
    child.wait().unwrap();
    assert_eq!(namespaces_of(&id).len(), 3, "kill -9 leaves the lab behind");
    let report = clean().unwrap();
    assert!(report.errors.is_empty(), "{report}");
    assert!(
        report.processes_ended >= 1,
        "the server (and sleeping client) were inside: {report}"
    );
    assert!(leftovers().is_empty(), "left {:?}", leftovers());
    assert!(netsweep_lab::state::find(&id).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs root (lab namespaces): ./run-tests runs it as root"]
fn clean_removes_nsw_links_and_tables_in_the_root_namespace() {
    let _lock = setup("clean_removes_nsw_links_and_tables_in_the_root_namespace");
    let ip = netsweep_lab::cmd::find_tool("ip").unwrap();
    let nft = netsweep_lab::cmd::find_tool("nft").unwrap();
    let st = std::process::Command::new(&ip)
        .args([
            "link",
            "add",
            "nsw-cleantest",
            "type",
            "veth",
            "peer",
            "name",
            "nsw-cleantest2",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let st = std::process::Command::new(&nft)
        .args(["add", "table", "inet", "nsw-cleantest"])
        .status()
        .unwrap();
    assert!(st.success());
    let report = clean().unwrap();
    assert!(report.errors.is_empty(), "{report}");
    assert_eq!(
        report.links.len(),
        1,
        "the peer goes with its veth: {report}"
    );
    assert_eq!(report.nft_tables, ["inet nsw-cleantest"]);
    assert!(leftovers().is_empty(), "left {:?}", leftovers());
}
