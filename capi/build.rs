//! Generates include/softrnic.h with cbindgen. The file is rewritten only when its content
//! changes; a source tree that cannot be written keeps its header, with a warning.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("cbindgen.toml: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(config)
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen could not generate softrnic.h: {e}"));
    let mut header = Vec::new();
    bindings.write(&mut header);
    let path = dir.join("include/softrnic.h");
    if std::fs::read(&path).ok().as_deref() != Some(header.as_slice())
        && let Err(e) = std::fs::write(&path, &header)
    {
        println!(
            "cargo:warning=cannot update {} ({e}); it is out of date",
            path.display()
        );
    }
}
