//! What the tests of the local model share: where SmolLM2's file is.

use std::path::PathBuf;

/// SmolLM2's file (`AGENTRY_LLM_MODEL_PATH`, else the repository's
/// `data/models/SmolLM2-135M-Instruct.Q4_1.gguf`, which `make model` fetches), or `None` with a
/// note when it is absent; a failure instead under `AGENTRY_REQUIRE_MODEL=1` (as in CI).
pub fn smollm2() -> Option<PathBuf> {
    let path = match std::env::var_os("AGENTRY_LLM_MODEL_PATH") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../data/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var("AGENTRY_REQUIRE_MODEL").as_deref() != Ok("1"),
        "AGENTRY_REQUIRE_MODEL=1 but the language model is not at {} (run `make model`)",
        path.display()
    );
    eprintln!("skipped: no language model at {} (run `make model`)", path.display());
    None
}
