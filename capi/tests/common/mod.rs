//! What the C-facing tests share: the system C compiler and the libsoftrnic.so of this build.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The system C compiler (`$CC`, else `cc`), if it runs.
pub fn compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ok = Command::new(&cc)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(cc)
}

/// The directory holding the libsoftrnic.so of this build: the test executable lives in
/// `<target>/<profile>/deps`, where cargo also puts the library (and copies it to
/// `<target>/<profile>`).
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.ancestors()
        .skip(1)
        .take(3)
        .find(|d| d.join("libsoftrnic.so").is_file())
        .unwrap_or_else(|| panic!("no libsoftrnic.so next to {}", exe.display()))
        .to_path_buf()
}
