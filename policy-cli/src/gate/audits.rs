//! The asset audit (`policy assets`) of every `assets` stanza that names its folder, as one
//! step of the gate.

use std::io::Write;
use std::path::{Path, PathBuf};

use policy_lang::PolicySet;

use crate::Exit;
use crate::assets::Report;

/// One folder's audit.
#[derive(Debug)]
pub(super) struct Audit {
    /// The `assets` stanza's name.
    pub(super) name: String,
    /// Its `dir`, relative to the file that declares it.
    pub(super) folder: PathBuf,
    pub(super) report: Report,
}

/// Audits every `assets` stanza with a `dir`; a folder without documents, or one that cannot
/// be read, is reported on `err` and makes the exit a usage error.
pub(super) fn audit_assets(set: &PolicySet, err: &mut dyn Write) -> (Vec<Audit>, Exit) {
    let mut audits = Vec::new();
    let mut exit = Exit::Clean;
    for stanza in &set.spec().assets {
        let Some(dir) = &stanza.dir else { continue };
        let base = stanza
            .loc
            .source()
            .and_then(|source| set.sources().get(source))
            .and_then(|file| Path::new(file.name()).parent().map(Path::to_path_buf))
            .unwrap_or_default();
        let folder = base.join(&dir.value);
        match crate::assets::audit(&folder, stanza) {
            Ok(report) if report.documents == 0 => {
                let _ = writeln!(
                    err,
                    "error: no `.html` documents under `{}` (the `dir` of `assets {}`)\n  help: build the front end first, and point `dir` at its output",
                    folder.display(),
                    stanza.name.value
                );
                exit = Exit::Usage;
            }
            Ok(report) => {
                if !report.is_clean() {
                    exit = exit.max(Exit::Problems);
                }
                audits.push(Audit {
                    name: stanza.name.value.clone(),
                    folder,
                    report,
                });
            }
            Err(error) => {
                let _ = writeln!(err, "{}", crate::files::io_error(&folder, &error));
                exit = Exit::Usage;
            }
        }
    }
    (audits, exit)
}
