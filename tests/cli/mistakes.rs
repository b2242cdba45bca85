//! What a new user types wrong (issue 40): each mistake gets a message that names the fix,
//! and a usage error exits 2.

use crate::common::*;
use std::process::Command;

fn netsweep(args: &[&str]) -> (i32, String) {
    let o = Command::new(bin()).args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_misspelt_subcommand_is_suggested_not_looked_up() {
    let (code, err) = netsweep(&["lsit"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean 'list'"), "{err}");
    let (code, err) = netsweep(&["reprot", "x.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did you mean 'report'"), "{err}");
}
