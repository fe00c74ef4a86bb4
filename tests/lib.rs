//! Cross-crate integration, conformance and interop tests for softrnic.
//!
//! The tests live in `tests/tests/`; test data (real captures) in `tests/data/`.

use std::path::PathBuf;

/// Path of a file under `tests/data/`.
pub fn data_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(rel)
}
