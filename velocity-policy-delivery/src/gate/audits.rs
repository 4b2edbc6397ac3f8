//! The asset audit ([`crate::assets`]) of every `assets` stanza that names its folder, as one
//! step of the gate.

use std::io;
use std::path::PathBuf;

use velocity_policy_lang::PolicySet;

use super::Verdict;
use crate::assets::{Report, audit, stanza_folder};

/// One folder's audit.
#[derive(Debug)]
pub struct Audit {
    /// The `assets` stanza's name.
    pub name: String,
    /// Its `dir`, relative to the file that declares it.
    pub folder: PathBuf,
    /// What the audit found.
    pub report: Report,
}

/// An `assets` folder that could not be audited.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The folder holds no HTML document.
    #[error("no `.html` documents under `{}` (the `dir` of `assets {stanza}`)", .folder.display())]
    NoDocuments {
        /// The folder.
        folder: PathBuf,
        /// The stanza whose `dir` it is.
        stanza: String,
    },
    /// The folder cannot be read.
    #[error("cannot read `{}`: {source}", .folder.display())]
    Unreadable {
        /// The folder.
        folder: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl AuditError {
    /// The fix.
    #[must_use]
    pub fn help(&self) -> &'static str {
        match self {
            AuditError::NoDocuments { .. } => {
                "build the front end first, and point `dir` at its output"
            }
            AuditError::Unreadable { source, .. } => match source.kind() {
                io::ErrorKind::InvalidInput => "name a `.policy` file, or a directory of them",
                _ => "",
            },
        }
    }
}

/// Audits every `assets` stanza with a `dir`: the audits made, the folders that could not be
/// audited (each [`Verdict::Unmeasured`]), and the worst verdict.
pub(super) fn audit_assets(set: &PolicySet) -> (Vec<Audit>, Vec<AuditError>, Verdict) {
    let mut audits = Vec::new();
    let mut errors = Vec::new();
    let mut verdict = Verdict::Pass;
    for stanza in &set.spec().assets {
        let Some(folder) = stanza_folder(set, stanza) else {
            continue;
        };
        match audit(&folder, stanza) {
            Ok(report) if report.documents == 0 => {
                errors.push(AuditError::NoDocuments {
                    folder,
                    stanza: stanza.name.value.clone(),
                });
                verdict = Verdict::Unmeasured;
            }
            Ok(report) => {
                if !report.is_clean() {
                    verdict = verdict.max(Verdict::Fail);
                }
                audits.push(Audit {
                    name: stanza.name.value.clone(),
                    folder,
                    report,
                });
            }
            Err(source) => {
                errors.push(AuditError::Unreadable { folder, source });
                verdict = Verdict::Unmeasured;
            }
        }
    }
    (audits, errors, verdict)
}
