//! Turning command-line paths into policy files (`policy_lang::files`), and the messages for
//! paths that yield none or cannot be read.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Exit, render};

/// The files `paths` name (a crate's folder stands for its policy directory, any other
/// directory for its `*.policy` files); a path that yields none, or cannot be read, is reported
/// on `err` with where it was looked for, and is a usage error.
pub(crate) fn expand(paths: &[PathBuf], err: &mut dyn Write) -> Result<Vec<PathBuf>, Exit> {
    policy_lang::files::expand(paths).map_err(|error| {
        let _ = writeln!(err, "{}", render::error_with_help(&error, &error.help()));
        Exit::Usage
    })
}

/// The message for a file that cannot be read.
pub(crate) fn io_error(path: &Path, error: &io::Error) -> String {
    let help = match error.kind() {
        io::ErrorKind::InvalidInput => "\n  help: name a `.policy` file, or a directory of them",
        _ => "",
    };
    format!("error: cannot read `{}`: {error}{help}", path.display())
}
