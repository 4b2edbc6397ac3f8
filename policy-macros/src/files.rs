//! The crate's `.policy` files, read at compile time.
//!
//! Where they are, in order:
//! 1. `[package.metadata.policy] dir = "..."` in the crate's `Cargo.toml`, relative to it;
//! 2. the nearest `policies/` directory at or above the annotated source file, up to the first
//!    directory that holds a `Cargo.toml` (so `src/lib.rs` finds `policies/` beside
//!    `Cargo.toml`, and a test file can keep its own `policies/` next to it);
//! 3. `policies/` beside `Cargo.toml` (`CARGO_MANIFEST_DIR`).
//!
//! No directory means no files: attributes then carry everything inline. Each file read is
//! handed back so the expansion can `include_bytes!` it and Cargo rebuilds when it changes.
//! Parsed sets are cached for the compiler process, keyed by the files' paths, sizes and
//! modification times.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use policy_lang::PolicySet;

/// The files of one directory, loaded.
#[derive(Clone)]
pub(crate) struct Loaded {
    pub(crate) set: PolicySet,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) dir: Option<PathBuf>,
}

type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn cache() -> &'static Mutex<HashMap<PathBuf, (Fingerprint, Loaded)>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, (Fingerprint, Loaded)>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

fn metadata_dir(manifest_dir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(manifest_dir.join("Cargo.toml")).ok()?;
    let table: toml::Table = text.parse().ok()?;
    let dir = table
        .get("package")?
        .get("metadata")?
        .get("policy")?
        .get("dir")?
        .as_str()?;
    Some(manifest_dir.join(dir))
}

/// The directory the policies of this expansion live in, if any.
pub(crate) fn locate(manifest_dir: Option<&Path>, source_file: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = manifest_dir.and_then(metadata_dir) {
        return Some(dir);
    }
    if let Some(file) = source_file {
        let file = match (file.is_relative(), manifest_dir) {
            (true, Some(manifest)) => manifest.join(file),
            _ => file.to_path_buf(),
        };
        let mut dir = file.parent();
        while let Some(current) = dir {
            let candidate = current.join("policies");
            if candidate.is_dir() {
                return Some(candidate);
            }
            if current.join("Cargo.toml").is_file() {
                break;
            }
            dir = current.parent();
        }
    }
    manifest_dir
        .map(|m| m.join("policies"))
        .filter(|p| p.is_dir())
}

fn fingerprint(dir: &Path) -> std::io::Result<Fingerprint> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "policy") && path.is_file() {
            let meta = std::fs::metadata(&path)?;
            entries.push((path, meta.len(), meta.modified().ok()));
        }
    }
    entries.sort();
    Ok(entries)
}

/// Loads every `*.policy` file of `dir` (cached while unchanged).
pub(crate) fn load(dir: Option<PathBuf>) -> Result<Loaded, String> {
    let Some(dir) = dir else {
        return Ok(Loaded {
            set: PolicySet::new(),
            files: Vec::new(),
            dir: None,
        });
    };
    let print = dir.display().to_string();
    let fingerprint = fingerprint(&dir)
        .map_err(|e| format!("cannot read the policy directory `{print}`: {e}"))?;
    let mut cache = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some((seen, loaded)) = cache.get(&dir)
        && *seen == fingerprint
    {
        return Ok(loaded.clone());
    }
    let mut set = PolicySet::new();
    let files = set
        .load_dir(&dir)
        .map_err(|e| format!("cannot read the policy files in `{print}`: {e}"))?;
    let loaded = Loaded {
        set,
        files,
        dir: Some(dir.clone()),
    };
    cache.insert(dir, (fingerprint, loaded.clone()));
    Ok(loaded)
}

/// File diagnostics already reported in this compiler process: each is reported once, at the
/// first function that uses the files, not at every one.
pub(crate) fn first_report(key: String) -> bool {
    static SEEN: OnceLock<Mutex<std::collections::HashSet<String>>> = OnceLock::new();
    SEEN.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key)
}
