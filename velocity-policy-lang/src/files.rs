//! Where the `.policy` files are: a crate's, found as the attribute macros find them, and the
//! ones a command is given (feature `files`).
//!
//! A crate's files, in order:
//! 1. `[package.metadata.policy] dir = "..."` in the crate's `Cargo.toml`, relative to it;
//! 2. for an annotated function, the nearest `policies/` directory at or above its source file,
//!    up to the first directory that holds a `Cargo.toml` (so `src/lib.rs` finds `policies/`
//!    beside `Cargo.toml`, and a test file can keep its own `policies/` next to it);
//! 3. `policies/` beside `Cargo.toml`.
//!
//! The macros follow all three ([`locate`]); a command given a crate's folder follows the
//! first and the last ([`crate_dir`]), which is what the crate's own code reads. [`expand`]
//! turns a command's paths into files, and says where it looked when a path yields none, so
//! that a mistyped path is an error rather than a clean run over nothing; [`resolve`] also
//! says which directory a crate's folder stood for ([`Resolved::reading`]), for the command to
//! print.
//!
//! ```
//! use std::path::Path;
//! use velocity_policy_lang::files::{FilesError, expand, resolve};
//!
//! let crate_folder = std::env::temp_dir().join(format!("policy-files-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&crate_folder)?;
//! std::fs::write(crate_folder.join("Cargo.toml"), "[package]\nname = \"shop\"\n")?;
//!
//! // No `policies/` yet: nothing to read is an error that says where it looked.
//! let error = expand(&[crate_folder.clone()]).unwrap_err();
//! assert!(matches!(error, FilesError::NoFiles { .. }));
//! assert!(error.to_string().contains("policies"));
//!
//! std::fs::create_dir_all(crate_folder.join("policies"))?;
//! std::fs::write(crate_folder.join("policies/shop.policy"), "request { deadline = 2s }\n")?;
//! assert_eq!(expand(&[crate_folder.clone()])?, [crate_folder.join("policies/shop.policy")]);
//!
//! // And which directory the crate's folder stood for, to be said.
//! let resolved = resolve(&[crate_folder.clone()])?;
//! let reading = resolved[0].reading().unwrap_or_default();
//! assert!(reading.starts_with("reading `"), "{reading}");
//! assert!(reading.contains("(the crate's `policies/`) for the crate at"), "{reading}");
//! # std::fs::remove_dir_all(&crate_folder)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io;
use std::path::{Path, PathBuf};

/// The `[package.metadata.policy]` table of the crate whose `Cargo.toml` is in `manifest_dir`,
/// if the file reads and has one (read with `toml_edit`, the parser the macros already load to
/// find the facade's name through `proc-macro-crate`: one TOML parser in their build, and no
/// serde).
fn metadata(manifest_dir: &Path) -> Option<toml_edit::Table> {
    let text = std::fs::read_to_string(manifest_dir.join("Cargo.toml")).ok()?;
    let mut manifest: toml_edit::DocumentMut = text.parse().ok()?;
    let policy = manifest
        .remove("package")?
        .into_table()
        .ok()?
        .remove("metadata")?
        .into_table()
        .ok()?
        .remove("policy")?;
    policy.into_table().ok()
}

/// `[package.metadata.policy] dir` of the crate whose `Cargo.toml` is in `manifest_dir`,
/// joined to it; `None` when the manifest does not read or does not set it.
#[must_use]
pub fn metadata_dir(manifest_dir: &Path) -> Option<PathBuf> {
    let dir = metadata(manifest_dir)?.remove("dir")?;
    Some(manifest_dir.join(dir.as_str()?))
}

/// Where a crate's policy directory is, and what said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateDir {
    /// The directory (it may not exist).
    pub path: PathBuf,
    /// Whether `[package.metadata.policy] dir` named it (else it is the crate's `policies/`).
    pub from_metadata: bool,
}

/// The policy directory of the crate whose `Cargo.toml` is in `manifest_dir`:
/// `[package.metadata.policy] dir`, else `policies/` beside `Cargo.toml`. It is returned even
/// when it does not exist, so that a caller can say where it looked.
#[must_use]
pub fn crate_dir(manifest_dir: &Path) -> CrateDir {
    match metadata_dir(manifest_dir) {
        Some(path) => CrateDir {
            path,
            from_metadata: true,
        },
        None => CrateDir {
            path: manifest_dir.join("policies"),
            from_metadata: false,
        },
    }
}

/// The directory the policies of an expansion live in, if any: the macros' order (the
/// module's docs), from the crate's root (`CARGO_MANIFEST_DIR`) and the annotated function's
/// source file.
#[must_use]
pub fn locate(manifest_dir: Option<&Path>, source_file: Option<&Path>) -> Option<PathBuf> {
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

/// How functions bind to the `.policy` operations: by their own name (the default) or only
/// through `#[velocity_policy::operation("...")]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// A function binds to the operation of its own name, or to the one it names.
    ByName,
    /// `[package.metadata.policy] bind = "explicit"`: a function binds only to the operation
    /// `#[velocity_policy::operation("...")]` names; its own name binds nothing.
    Explicit,
}

/// The crate's choice of [`Binding`], from `[package.metadata.policy] bind` in its
/// `Cargo.toml`; an unknown value is an error naming the file and the accepted values.
pub fn binding(manifest_dir: Option<&Path>) -> Result<Binding, String> {
    let Some(manifest_dir) = manifest_dir else {
        return Ok(Binding::ByName);
    };
    let manifest = manifest_dir.join("Cargo.toml");
    let bind = metadata(manifest_dir).and_then(|mut policy| policy.remove("bind"));
    match bind {
        None => Ok(Binding::ByName),
        Some(item) if item.as_str() == Some("by-name") => Ok(Binding::ByName),
        Some(item) if item.as_str() == Some("explicit") => Ok(Binding::Explicit),
        Some(other) => Err(format!(
            "`[package.metadata.policy] bind = {}` in `{}` is not a way to bind [policy::unknown-binding]\nhelp: write `bind = \"explicit\"` (a function binds only to the operation `#[velocity_policy::operation(\"...\")]` names) or `bind = \"by-name\"` (the default: also to the operation of its own name)",
            match other.as_str() {
                Some(s) => format!("{s:?}"),
                None => other.type_name().to_owned(),
            },
            manifest.display()
        )),
    }
}

/// Where [`expand`] looked for the files of a directory it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Looked {
    /// In the directory itself.
    Directory,
    /// In a crate's policy directory.
    Crate(CrateDir),
}

/// Why [`expand`] found no files for a path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilesError {
    /// A directory could not be read.
    #[error("cannot read `{}`: {source}", .path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A directory, or a crate's policy directory, holds no `*.policy` file.
    #[error("{}", no_files(.path, .looked))]
    NoFiles {
        /// The path as given.
        path: PathBuf,
        /// Where the files were looked for.
        looked: Looked,
    },
}

impl FilesError {
    /// The fix.
    #[must_use]
    pub fn help(&self) -> String {
        match self {
            FilesError::Io { source, .. } => match source.kind() {
                io::ErrorKind::InvalidInput => {
                    "name a `.policy` file, or a directory of them".to_owned()
                }
                _ => String::new(),
            },
            FilesError::NoFiles {
                looked: Looked::Directory,
                ..
            } => "name a `.policy` file, a directory of them, or a crate's folder (its `policies/`, or the `dir` of `[package.metadata.policy]` in its `Cargo.toml`)".to_owned(),
            FilesError::NoFiles {
                path,
                looked: Looked::Crate(dir),
            } => {
                let manifest = path.join("Cargo.toml");
                if dir.from_metadata {
                    format!(
                        "put the crate's `.policy` files in `{}`, or fix `dir` in `[package.metadata.policy]` of `{}`",
                        dir.path.display(),
                        manifest.display()
                    )
                } else {
                    format!(
                        "put the crate's `.policy` files in `{}`, or name their directory with `dir` in `[package.metadata.policy]` of `{}`",
                        dir.path.display(),
                        manifest.display()
                    )
                }
            }
        }
    }
}

/// The message of [`FilesError::NoFiles`].
fn no_files(path: &Path, looked: &Looked) -> String {
    let shown = path.display();
    match looked {
        Looked::Directory => format!("no `.policy` files in `{shown}`"),
        Looked::Crate(dir) => {
            let what = dir.describe();
            let state = if dir.path.is_dir() {
                "which holds none"
            } else {
                "which does not exist"
            };
            format!(
                "no `.policy` files for the crate at `{shown}`: looked in `{}` ({what}), {state}",
                dir.path.display()
            )
        }
    }
}

/// The `*.policy` files of `dir` (not recursive), sorted; entries that are not regular files,
/// such as a named pipe or an editor's dangling lock link, are left out without being opened.
fn policy_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let file = entry?.path();
        if file.extension().is_some_and(|ext| ext == "policy") && file.is_file() {
            found.push(file);
        }
    }
    found.sort();
    Ok(found)
}

/// What one path given to a command stood for ([`resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path as given.
    pub path: PathBuf,
    /// The crate's policy directory that was read, when the path is a crate's folder (a
    /// directory with a `Cargo.toml`); `None` for a file or any other directory.
    pub crate_dir: Option<CrateDir>,
    /// The files it stands for, sorted within a directory.
    pub files: Vec<PathBuf>,
}

impl Resolved {
    /// Where the files of a crate's folder were read, for a command to say so:
    /// ``reading `shop/policies` (the crate's `policies/`) for the crate at `shop` ``; `None`
    /// when the path is not a crate's folder.
    #[must_use]
    pub fn reading(&self) -> Option<String> {
        let dir = self.crate_dir.as_ref()?;
        Some(format!(
            "reading `{}` ({}) for the crate at `{}`",
            dir.path.display(),
            dir.describe(),
            self.path.display()
        ))
    }
}

impl CrateDir {
    /// What named this directory: the crate's `policies/`, or the metadata `dir`.
    #[must_use]
    pub fn describe(&self) -> &'static str {
        if self.from_metadata {
            "the `dir` of `[package.metadata.policy]` in its `Cargo.toml`"
        } else {
            "the crate's `policies/`"
        }
    }
}

/// Each path a command is given, with the files it stands for: each path as given, except
/// directories. A crate's folder (one with a `Cargo.toml`) stands for the `*.policy` files of
/// its policy directory ([`crate_dir`]), any other directory for its own `*.policy` files. A
/// directory that yields none is an error that says where it looked.
pub fn resolve(paths: &[PathBuf]) -> Result<Vec<Resolved>, FilesError> {
    let mut resolved = Vec::with_capacity(paths.len());
    for path in paths {
        if !path.is_dir() {
            resolved.push(Resolved {
                path: path.clone(),
                crate_dir: None,
                files: vec![path.clone()],
            });
            continue;
        }
        let (dir, looked) = if path.join("Cargo.toml").is_file() {
            let dir = crate_dir(path);
            (dir.path.clone(), Looked::Crate(dir))
        } else {
            (path.clone(), Looked::Directory)
        };
        let found = if dir.is_dir() {
            policy_files(&dir).map_err(|source| FilesError::Io {
                path: dir.clone(),
                source,
            })?
        } else {
            Vec::new()
        };
        if found.is_empty() {
            return Err(FilesError::NoFiles {
                path: path.clone(),
                looked,
            });
        }
        resolved.push(Resolved {
            path: path.clone(),
            crate_dir: match looked {
                Looked::Crate(dir) => Some(dir),
                Looked::Directory => None,
            },
            files: found,
        });
    }
    Ok(resolved)
}

/// The files a command reads for `paths`, in order: [`resolve`]'s, flattened.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, FilesError> {
    Ok(resolve(paths)?
        .into_iter()
        .flat_map(|resolved| resolved.files)
        .collect())
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
}
