//! With the `xdp` feature: compiles the XDP program that steers the RNIC's frames to its
//! AF_XDP sockets (src/device/xdp_steer.bpf.c) with clang for the BPF target. Nothing to do
//! otherwise.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_XDP").is_none() {
        return;
    }
    let src = "src/device/xdp_steer.bpf.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("xdp_steer.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = Command::new(&clang)
        .args(["-O2", "-Wall", "-Werror", "-target", "bpf", "-c", src, "-o"])
        .arg(&out)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("{clang} could not compile {src} for BPF ({s})"),
        Err(e) => panic!(
            "the `xdp` feature needs clang to build its XDP program ({clang}: {e}); \
             scripts/install-xdp-deps.sh installs it"
        ),
    }
}
