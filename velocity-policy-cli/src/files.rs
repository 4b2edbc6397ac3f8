//! Turning command-line paths into policy files (`velocity_policy_lang::files`), and the messages for
//! paths that yield none or cannot be read.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Exit, render};

/// The files `paths` name (a crate's folder stands for its policy directory, any other
/// directory for its `*.policy` files); a path that yields none, or cannot be read, is reported
/// on `err` with where it was looked for, and is a usage error. A crate's folder is said on
/// `err` with the directory read for it (`note: reading ...`), so that a run over another
/// directory than the one meant shows it.
pub(crate) fn expand(paths: &[PathBuf], err: &mut dyn Write) -> Result<Vec<PathBuf>, Exit> {
    let resolved = velocity_policy_lang::files::resolve(paths).map_err(|error| {
        let _ = writeln!(err, "{}", render::error_with_help(&error, &error.help()));
        Exit::Usage
    })?;
    let mut files = Vec::new();
    for path in resolved {
        if let Some(reading) = path.reading() {
            let _ = writeln!(err, "note: {reading}");
        }
        files.extend(path.files);
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
