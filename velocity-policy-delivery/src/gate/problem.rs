//! What the gate finds wrong, each with a stable code, a label on the policy line it concerns
//! and a help that says the fix.
//!
//! These are the gate's own codes (`policy::gate::...`, in the scheme of `velocity-policy-lang`'s
//! diagnostics): they need the file system, a build or Cargo, so the language's validator
//! cannot report them. They are drawn on the policy text by the language's own adapter
//! (`velocity_policy_lang::diagnostic::Renderable`).
//!
//! | code | what it means | exit |
//! |---|---|---|
//! | `policy::gate::over-ceiling` | a measurement above its ceiling | 1 |
//! | `policy::gate::quarantine-broken` | a quarantined crate in the package's default build, with no `justification` | 1 |
//! | `policy::gate::not-in-only` | a crate outside `only` depends on a quarantined crate directly | 1 |
//! | `policy::gate::missing-dir` | a `ceilings` stanza's `dir` does not exist | 2 |
//! | `policy::gate::no-documents` | a front-end folder without HTML documents | 2 |
//! | `policy::gate::missing-artifact` | a binary that is not built | 2 |
//! | `policy::gate::not-a-binary` | a file the gate cannot read as an executable | 2 |
//! | `policy::gate::no-files` | a glob that matches nothing, or is not a glob | 2 |
//! | `policy::gate::unreadable` | a file or folder that cannot be read | 2 |
//! | `policy::gate::cargo-metadata` | `cargo metadata` failed | 2 |
//! | `policy::gate::unknown-package` | a package that is not in the workspace | 2 |
//! | `policy::gate::unknown-feature` | a `behind` feature the package does not have | 2 |
//! | `policy::gate::unknown-crate` | a quarantined crate that no feature of the workspace can bring in | 2 |
//! | `policy::gate::not-behind-feature` (warning) | the feature does not bring the crate in either: the quarantine guards nothing | 0 |
//! | `policy::gate::unresolved-reference` (warning) | a document or module refers to a local file that is not there | 0 |

use miette::Severity;
use serde_json::{Value, json};
use velocity_policy_lang::diagnostic::Renderable;
use velocity_policy_lang::{Label, Loc, Sources};

use super::Verdict;

/// The rule a gate problem comes from.
#[derive(Debug, Clone, PartialEq, thiserror::Error, miette::Diagnostic)]
#[non_exhaustive]
pub enum GateError {
    /// A measurement above its ceiling.
    #[error("`{metric}` is {measured}, over its ceiling of {ceiling}")]
    #[diagnostic(
        code("policy::gate::over-ceiling"),
        help(
            "find what grew and move it out of this build (behind a feature, or a dynamic import); raise the ceiling by hand only if the growth is worth it"
        )
    )]
    OverCeiling {
        /// The ceiling's metric.
        metric: String,
        /// The measurement, formatted.
        measured: String,
        /// The ceiling, formatted.
        ceiling: String,
    },

    /// A quarantined crate in the default build.
    #[error("quarantined crate `{name}` is in the default build of `{package}`")]
    #[diagnostic(
        code("policy::gate::quarantine-broken"),
        help(
            "the tree on standard output shows what pulls it in: make that dependency optional and turn it on from the `{behind}` feature, or give the quarantine a `justification`"
        )
    )]
    QuarantineBroken {
        /// The crate.
        name: String,
        /// The package.
        package: String,
        /// The feature it should stay behind.
        behind: String,
    },

    /// A quarantined feature turned on in the default build.
    #[error("quarantined feature `{feature}` is on in the default build of `{package}`")]
    #[diagnostic(
        code("policy::gate::quarantined-feature-on"),
        help(
            "turn it on only from the `{behind}` feature of `{package}` (and no dependency's default), or give the quarantine a `justification`"
        )
    )]
    QuarantinedFeatureOn {
        /// `package/feature`.
        feature: String,
        /// The package whose default build turns it on.
        package: String,
        /// The feature it should stay behind.
        behind: String,
    },

    /// A direct dependent that `only` does not allow.
    #[error("`{dependent}` depends on quarantined crate `{name}` directly, and is not in `only`")]
    #[diagnostic(
        code("policy::gate::not-in-only"),
        help("reach `{name}` through {allowed}, or add `{dependent}` to `only`")
    )]
    NotInOnly {
        /// The crate.
        name: String,
        /// The dependent.
        dependent: String,
        /// The allowed dependents, formatted.
        allowed: String,
    },

    /// A front-end folder that does not exist.
    #[error("front-end build folder `{dir}` does not exist")]
    #[diagnostic(
        code("policy::gate::missing-dir"),
        help("build the front end first, or fix `dir` (paths are relative to `{root}`)")
    )]
    MissingDir {
        /// The folder as written.
        dir: String,
        /// What paths are relative to.
        root: String,
    },

    /// A front-end folder without HTML documents.
    #[error("front-end build folder `{dir}` has no HTML documents")]
    #[diagnostic(
        code("policy::gate::no-documents"),
        help(
            "the front-end metrics follow what each `.html` file loads: point `dir` at the bundler's output folder, or keep only `total_client_js_kb`"
        )
    )]
    NoDocuments {
        /// The folder as written.
        dir: String,
    },

    /// A binary that is not built.
    #[error("`{path}` does not exist")]
    #[diagnostic(
        code("policy::gate::missing-artifact"),
        help("build it first: `{command}`")
    )]
    MissingArtifact {
        /// The path as written.
        path: String,
        /// The command that builds it.
        command: String,
    },

    /// A file that is not an executable.
    #[error("`{path}` is not a binary the gate can read: {reason}")]
    #[diagnostic(
        code("policy::gate::not-a-binary"),
        help("name an executable that cargo built (ELF, Mach-O or PE)")
    )]
    NotABinary {
        /// The path as written.
        path: String,
        /// Why.
        reason: String,
    },

    /// A glob that matches nothing.
    #[error("`{pattern}` matches no file")]
    #[diagnostic(code("policy::gate::no-files"), help("{help}"))]
    NoFiles {
        /// The glob as written.
        pattern: String,
        /// What to do.
        help: String,
    },

    /// A file or folder that cannot be read.
    #[error("cannot read `{path}`: {reason}")]
    #[diagnostic(
        code("policy::gate::unreadable"),
        help("check that the file exists and may be read")
    )]
    Unreadable {
        /// The path.
        path: String,
        /// The I/O error.
        reason: String,
    },

    /// `cargo metadata` failed.
    #[error("`cargo metadata` failed in `{root}`")]
    #[diagnostic(code("policy::gate::cargo-metadata"), help("{output}"))]
    CargoMetadata {
        /// Where it ran.
        root: String,
        /// What it said.
        output: String,
    },

    /// A package that is not in the workspace.
    #[error("no package `{package}` in the workspace at `{root}`")]
    #[diagnostic(code("policy::gate::unknown-package"), help("{help}"))]
    UnknownPackage {
        /// The package as written.
        package: String,
        /// The workspace.
        root: String,
        /// A suggestion, or the list of members.
        help: String,
    },

    /// A feature the package does not have.
    #[error("package `{package}` has no feature `{feature}`")]
    #[diagnostic(code("policy::gate::unknown-feature"), help("{help}"))]
    UnknownFeature {
        /// The package.
        package: String,
        /// The feature as written.
        feature: String,
        /// A suggestion, or the list of features.
        help: String,
    },

    /// A crate no feature of the workspace brings in.
    #[error("no crate `{name}` in the dependency graph of the workspace")]
    #[diagnostic(code("policy::gate::unknown-crate"), help("{help}"))]
    UnknownCrate {
        /// The crate as written.
        name: String,
        /// A suggestion.
        help: String,
    },

    /// The feature does not bring the crate in.
    #[error("`{name}` is not in the build of `{package}` even with feature `{behind}`")]
    #[diagnostic(
        code("policy::gate::not-behind-feature"),
        severity(Warning),
        help(
            "this quarantine guards nothing: name the feature that brings `{name}` in, or remove the stanza"
        )
    )]
    NotBehindFeature {
        /// The crate.
        name: String,
        /// The package.
        package: String,
        /// The feature.
        behind: String,
    },

    /// Local references to files that are not there.
    #[error(
        "{count} local reference(s) in `{dir}` point at no file, the first `{example}` in `{from}`"
    )]
    #[diagnostic(
        code("policy::gate::unresolved-reference"),
        severity(Warning),
        help(
            "the sizes leave them out; if the site is served under a base path, point `dir` at the folder that path maps to"
        )
    )]
    UnresolvedReference {
        /// The folder.
        dir: String,
        /// How many.
        count: usize,
        /// The first one.
        example: String,
        /// The file it was written in.
        from: String,
    },
}

/// A gate problem with the policy locations it concerns (primary first).
#[derive(Debug, Clone)]
pub struct Problem {
    /// The rule.
    pub error: GateError,
    /// Where, and what about it, primary first.
    pub labels: Vec<Label>,
}

impl Problem {
    /// A problem about the policy text at `loc`.
    pub(crate) fn at(error: GateError, loc: Loc, text: impl Into<String>) -> Self {
        Problem {
            error,
            labels: vec![Label {
                loc,
                text: text.into(),
            }],
        }
    }

    /// The stable code.
    #[must_use]
    pub fn code(&self) -> String {
        miette::Diagnostic::code(&self.error)
            .map(|code| code.to_string())
            .unwrap_or_default()
    }

    /// Whether this is a warning (it does not change the exit code).
    #[must_use]
    pub fn is_warning(&self) -> bool {
        matches!(
            miette::Diagnostic::severity(&self.error),
            Some(Severity::Warning | Severity::Advice)
        )
    }

    /// How the gate ends because of it: a ceiling passed or a quarantine broken fails it, a
    /// measurement that could not be made leaves it unmeasured, a warning passes.
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        match self.error {
            _ if self.is_warning() => Verdict::Pass,
            GateError::OverCeiling { .. }
            | GateError::QuarantineBroken { .. }
            | GateError::QuarantinedFeatureOn { .. }
            | GateError::NotInOnly { .. } => Verdict::Fail,
            _ => Verdict::Unmeasured,
        }
    }

    /// The rule with its labels drawn on the policy text, for a miette report handler.
    #[must_use]
    pub fn renderable<'a>(&'a self, sources: &'a Sources) -> Renderable<'a> {
        Renderable::new(&self.error, &self.labels, sources)
    }

    /// The problem as JSON, in the shape `policy check` uses.
    #[must_use]
    pub fn json(&self, sources: &Sources) -> Value {
        let primary = self
            .labels
            .first()
            .and_then(|label| sources.position(label.loc));
        let help = miette::Diagnostic::help(&self.error).map(|help| help.to_string());
        json!({
            "severity": if self.is_warning() { "warning" } else { "error" },
            "code": self.code(),
            "message": self.error.to_string(),
            "help": help,
            "file": primary.map(|p| p.file),
            "line": primary.map(|p| p.line),
            "column": primary.map(|p| p.column),
        })
    }
}
