//! `netsweep completions SHELL` and `netsweep man` (issue 15 item 2): generated from the clap
//! definition, so they must offer exactly what the command line accepts. The bash script is
//! sourced and asked to complete real words; the man pages are rendered by groff with every
//! warning turned on.

use crate::common::*;
use std::process::Command;

fn netsweep(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin()).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// What bash's completion function offers for `words` (the last one being completed).
fn bash_complete(words: &[&str]) -> Vec<String> {
    let script = format!(
        "source <({bin} completions bash)\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\n\
         _netsweep netsweep \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        bin = bin(),
        words = words
            .iter()
            .map(|w| format!("'{w}'"))
            .collect::<Vec<_>>()
            .join(" "),
        cword = words.len() - 1,
    );
    let o = Command::new("bash").arg("-c").arg(script).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_offers_subcommands_flags_and_values() {
    assert_eq!(bash_complete(&["netsweep", "se"]), ["serve"]);
    let mut transports = bash_complete(&["netsweep", "run", "--transport", ""]);
    transports.sort();
    // The transports clap accepts, from its own error message.
    let err = netsweep(&["run", "--transport", "nope"]).2;
    let list = err.split("possible values: ").nth(1).unwrap();
    let list = list.split('\n').next().unwrap().trim_end_matches(']');
    let mut expected: Vec<String> = list.split(", ").map(|s| s.trim().to_string()).collect();
    expected.sort();
    assert_eq!(transports, expected);
    let flags = bash_complete(&["netsweep", "run", "--max-p"]);
    assert_eq!(flags, ["--max-point-time"]);
    let shells = bash_complete(&["netsweep", "completions", ""]);
    assert!(shells.contains(&"fish".to_string()), "{shells:?}");
}

#[test]
fn other_shells_get_their_own_script() {
    let (code, zsh, _) = netsweep(&["completions", "zsh"]);
    assert_eq!(code, 0);
    assert!(zsh.starts_with("#compdef netsweep"), "{}", &zsh[..80]);
    assert!(zsh.contains("--max-point-time"));
    let (code, fish, _) = netsweep(&["completions", "fish"]);
    assert_eq!(code, 0);
    assert!(fish.contains("complete -c netsweep"));
    let (code, _, err) = netsweep(&["completions", "tcsh"]);
    assert_eq!(code, 2, "an unknown shell is a usage error: {err}");
    assert!(err.contains("possible values"), "{err}");
}

#[test]
fn man_page_lists_every_subcommand_and_flag() {
    let (code, page, _) = netsweep(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH netsweep 1"), "{}", &page[..200]);
    for sub in [
        "run", "serve", "report", "compare", "list", "lab", "scenario",
    ] {
        assert!(
            page.contains(&format!("netsweep\\-{sub}(1)")),
            "no {sub} in SUBCOMMANDS"
        );
    }
    for flag in [
        "\\-\\-max\\-point\\-time",
        "\\-\\-invalidate\\-cache",
        "\\-\\-cpu",
    ] {
        assert!(page.contains(flag), "no {flag}");
    }
}

#[test]
#[ignore = "needs groff (groff-base): ./run-tests installs it"]
fn man_pages_render_without_warnings() {
    require_tool("man_pages_render_without_warnings", "groff", "groff-base");
    let dir = scratch("man-pages");
    let (code, _, err) = netsweep(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut pages: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    // One page per (sub)command, nested ones included, and none for clap's `help`.
    for p in [
        "netsweep.1",
        "netsweep-run.1",
        "netsweep-lab-up.1",
        "netsweep-scenario-run.1",
    ] {
        assert!(pages.contains(&p.to_string()), "{pages:?}");
    }
    assert!(!pages.iter().any(|p| p.contains("help")), "{pages:?}");
    for p in &pages {
        let o = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(dir.join(p))
            .output()
            .unwrap();
        assert!(o.status.success(), "groff failed on {p}");
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "",
            "groff warnings on {p}"
        );
    }
    let (code, _, err) = netsweep(&["man", "--dir", dir.join("missing").to_str().unwrap()]);
    assert_eq!(code, 2, "a missing directory is a usage error");
    assert!(err.contains("mkdir -p"), "{err}");
}
