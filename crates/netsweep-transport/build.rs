//! Builds the `xdp` transport's XDP program (bpf/redirect.bpf.c) into BPF bytecode with clang,
//! only when the `xdp` feature is on; the default build needs nothing from here.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=bpf/redirect.bpf.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    if std::env::var_os("CARGO_FEATURE_XDP").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // linux/bpf.h includes asm/types.h, which Debian keeps under the multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = format!("/usr/include/{arch}-linux-gnu");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I{multiarch}"))
        .args(["-c", "bpf/redirect.bpf.c", "-o"])
        .arg(out.join("redirect.bpf.o"))
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "clang failed ({s}) building the XDP program bpf/redirect.bpf.c for `--features xdp`: \
             it needs libbpf's headers (apt-get install libbpf-dev)"
        ),
        Err(e) => panic!(
            "cannot run {clang} ({e}): `--features xdp` builds its XDP program with clang \
             (apt-get install clang libbpf-dev, or set CLANG to a clang with the bpf target)"
        ),
    }
}
