//! The cargo-fuzz targets' seed corpora (`engine/fuzz/corpus/<target>/`),
//! read for the deterministic "never panics" runs.
//!
//! Not for: mutating them (each edge's test has its own mutator, tuned to
//! the bytes that matter to its parser).

use std::path::Path;

/// Every file of the target's corpus, sorted by content (at least five).
pub fn files(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .flatten()
        .map(|e| std::fs::read(e.path()).expect("corpus file"))
        .collect();
    out.sort();
    assert!(out.len() >= 5, "{target}: corpus too small: {}", out.len());
    out
}
