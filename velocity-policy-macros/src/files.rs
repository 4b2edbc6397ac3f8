//! The crate's `.policy` files, read at compile time.
//!
//! Where they are is `velocity_policy_lang::files`'s to say ([`locate`]: `[package.metadata.policy] dir`,
//! else the nearest `policies/` at or above the annotated source file, else `policies/` beside
//! `Cargo.toml`), shared with the `policy` command, which looks there when it is given a
//! crate's folder.
//!
//! No directory means no files: attributes then carry everything inline. Each file read is
//! handed back so the expansion can `include_bytes!` it ([`track`]) and Cargo rebuilds when it
//! changes. Parsed sets are cached for the compiler process, keyed by the files' paths, sizes
//! and modification times.
//!
//! What is wrong in the files themselves is part of what is loaded ([`Loaded::problems`]), and
//! every expansion that reads them reports it: under rust-analyzer one proc-macro server
//! expands every function for hours, so an error shown only once would vanish from the editor
//! after the first expansion.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use proc_macro2::TokenStream;
use quote::quote;
use velocity_policy_lang::{Loc, PolicySet};

/// The files of one directory, loaded.
#[derive(Clone, Default)]
pub(crate) struct Loaded {
    pub(crate) set: PolicySet,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) dir: Option<PathBuf>,
    /// The errors the files have on their own, each as the message an expansion reports.
    pub(crate) problems: Vec<String>,
}

/// `const _: &[u8] = include_bytes!(..)` for every policy file read, so Cargo rebuilds the
/// crate when one changes. Emitted as the first statements of the function's body (an item
/// inside a block is allowed wherever the function is: free, in an impl, in a trait impl).
pub(crate) fn track(files: &[PathBuf]) -> TokenStream {
    let files = files.iter().filter_map(|f| f.to_str());
    quote! {
        #( const _: &[u8] = ::core::include_bytes!(#files); )*
    }
}

/// Whether a location is in a file (not an attribute's token).
pub(crate) fn in_a_file(loc: Loc) -> bool {
    !matches!(loc, Loc::External(_))
}

/// The errors of `set` that the files alone raise, rendered with file, line, column and
/// snippet.
fn problems(set: &PolicySet) -> Vec<String> {
    set.check()
        .errors
        .iter()
        .filter(|diagnostic| {
            diagnostic.primary_loc().is_none_or(in_a_file)
                && diagnostic.labels.iter().all(|label| in_a_file(label.loc))
        })
        .map(|diagnostic| {
            let position = diagnostic
                .primary_loc()
                .and_then(|loc| set.sources().position(loc))
                .map_or_else(|| "a policy file".to_owned(), |p| p.to_string());
            format!(
                "error in {position}: {} [{}]\n{}",
                diagnostic.message(),
                diagnostic.code(),
                set.render(diagnostic)
            )
        })
        .collect()
}

type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn cache() -> &'static Mutex<HashMap<PathBuf, (Fingerprint, Loaded)>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, (Fingerprint, Loaded)>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

pub(crate) use velocity_policy_lang::files::{Binding, binding, locate};

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
        return Ok(Loaded::default());
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
        problems: problems(&set),
        set,
        files,
        dir: Some(dir.clone()),
    };
    cache.insert(dir, (fingerprint, loaded.clone()));
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    #[test]
    fn every_load_of_a_broken_file_reports_its_error() {
        let dir = std::env::temp_dir().join(format!("policy-macros-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("broken.policy"),
            "breaker search { open_after = 5 failures within 30s; coldown = 20s }\n",
        )
        .unwrap();
        // As a long-lived proc-macro server does: the same files, read for one expansion after
        // another (the second from the cache).
        for expansion in 1..=3 {
            let loaded = load(Some(dir.clone())).unwrap();
            let [problem] = loaded.problems.as_slice() else {
                panic!("expansion {expansion}: {:?}", loaded.problems);
            };
            assert!(
                problem
                    .contains("unknown setting `coldown` in `breaker` [policy::unknown-setting]"),
                "{problem}"
            );
            assert!(problem.contains("broken.policy:1:54"), "{problem}");
        }
        std::fs::write(
            dir.join("broken.policy"),
            "breaker search { open_after = 5 failures within 30s; cooldown = 20s }\n",
        )
        .unwrap();
        // Fixed: the size changed, so the cache does not hide the fix either.
        assert!(load(Some(dir.clone())).unwrap().problems.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
