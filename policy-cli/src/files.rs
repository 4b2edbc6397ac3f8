//! Turning command-line paths into policy files.

use std::io;
use std::path::{Path, PathBuf};

/// Each path as given, except directories, which stand for their `*.policy` files (sorted;
/// entries that are not regular files, such as a named pipe or an editor's dangling lock link,
/// are left out without being opened).
pub(crate) fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, (PathBuf, io::Error)> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            let entries = std::fs::read_dir(path).map_err(|error| (path.clone(), error))?;
            for entry in entries {
                let entry = entry.map_err(|error| (path.clone(), error))?;
                let file = entry.path();
                if file.extension().is_some_and(|ext| ext == "policy") && file.is_file() {
                    found.push(file);
                }
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// The message for a file that cannot be read.
pub(crate) fn io_error(path: &Path, error: &io::Error) -> String {
    let help = match error.kind() {
        io::ErrorKind::InvalidInput => "\n  help: name a `.policy` file, or a directory of them",
        _ => "",
    };
    format!("error: cannot read `{}`: {error}{help}", path.display())
}
