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

use policy_lang::{Loc, PolicySet};
use proc_macro2::TokenStream;
use quote::quote;

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

/// How functions bind to the `.policy` operations: by their own name (the default) or only
/// through `#[policy::operation("...")]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// A function binds to the operation of its own name, or to the one it names.
    ByName,
    /// `[package.metadata.policy] bind = "explicit"`: a function binds only to the operation
    /// `#[policy::operation("...")]` names; its own name binds nothing.
    Explicit,
}

/// The crate's choice of [`Binding`], from `[package.metadata.policy] bind` in its
/// `Cargo.toml`; an unknown value is an error naming the file and the accepted values.
pub(crate) fn binding(manifest_dir: Option<&Path>) -> Result<Binding, String> {
    let Some(manifest_dir) = manifest_dir else {
        return Ok(Binding::ByName);
    };
    let manifest = manifest_dir.join("Cargo.toml");
    let Some(table) = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
    else {
        return Ok(Binding::ByName);
    };
    let bind = table
        .get("package")
        .and_then(|p| p.get("metadata"))
        .and_then(|m| m.get("policy"))
        .and_then(|p| p.get("bind"));
    match bind {
        None => Ok(Binding::ByName),
        Some(toml::Value::String(s)) if s == "by-name" => Ok(Binding::ByName),
        Some(toml::Value::String(s)) if s == "explicit" => Ok(Binding::Explicit),
        Some(other) => Err(format!(
            "`[package.metadata.policy] bind = {}` in `{}` is not a way to bind [policy::unknown-binding]\nhelp: write `bind = \"explicit\"` (a function binds only to the operation `#[policy::operation(\"...\")]` names) or `bind = \"by-name\"` (the default: also to the operation of its own name)",
            match other {
                toml::Value::String(s) => format!("{s:?}"),
                _ => other.type_str().to_owned(),
            },
            manifest.display()
        )),
    }
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
    fn the_binding_comes_from_the_manifests_metadata() {
        let dir = std::env::temp_dir().join(format!("policy-macros-bind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = |metadata: &str| {
            std::fs::write(
                dir.join("Cargo.toml"),
                format!("[package]\nname = \"shop\"\n{metadata}"),
            )
            .unwrap();
            binding(Some(&dir))
        };
        assert_eq!(manifest(""), Ok(Binding::ByName));
        assert_eq!(
            manifest("[package.metadata.policy]\ndir = \"p\"\n"),
            Ok(Binding::ByName)
        );
        assert_eq!(
            manifest("[package.metadata.policy]\nbind = \"explicit\"\n"),
            Ok(Binding::Explicit)
        );
        assert_eq!(
            manifest("[package.metadata.policy]\nbind = \"by-name\"\n"),
            Ok(Binding::ByName)
        );
        let wrong = manifest("[package.metadata.policy]\nbind = \"explicitly\"\n").unwrap_err();
        assert!(wrong.contains("bind = \"explicitly\""), "{wrong}");
        assert!(wrong.contains("Cargo.toml"), "{wrong}");
        assert!(wrong.contains("[policy::unknown-binding]"), "{wrong}");
        assert!(wrong.contains("write `bind = \"explicit\"`"), "{wrong}");
        assert_eq!(binding(None), Ok(Binding::ByName));
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
