//! `policy assets [FOLDER]`: audit what a built front end ships, its images and fonts, against
//! the ceilings of an `assets` stanza (or the defaults).
//!
//! The audit reads every `.html` document under the folder, the images and style sheets they
//! reference, and the fonts those style sheets load; formats come from the files' bytes, never
//! their names. [`audit`] is the library entry point (`policy gate` calls it too); each finding
//! names its rule, the document (or style sheet), line and column, and the fix.
//!
//! # Rules
//!
//! A rule's id is the Lighthouse audit's where Lighthouse has one, so a finding can be looked
//! up in a Lighthouse report; the others are ours. Counts are per document.
//!
//! | code | Lighthouse | fires when | the fix |
//! |---|---|---|---|
//! | `assets::uses-optimized-images` | yes | an image file is over `max_image` | compress or resize it |
//! | `assets::modern-image-formats` | yes | a PNG, JPEG or GIF of 8 KiB or more has no AVIF or WebP alternative: no `<picture>` source, `srcset` candidate or same-stem sibling file that is AVIF or WebP by its bytes | serve `NAME.avif`/`NAME.webp` or a `<picture>` source |
//! | `assets::unsized-images` | yes | an `<img>` lacks `width` or `height` (attributes or inline `style`; `aspect-ratio` with one of them counts) | add both, the help gives the file's size |
//! | `assets::image-aspect-ratio` | yes | the declared height is 2 px or more from what the declared width and the file's ratio give | fix the height, or crop the file |
//! | `assets::uses-responsive-images` | yes | an image of `large_image` or more has no `srcset` (on it or its `<picture>` sources) with more than one candidate, or a `srcset` with `w` descriptors has no `sizes` | add `srcset` and `sizes` |
//! | `assets::lcp-lazy-loaded` | yes | the first image of `large_image` or more (the likely LCP element) has `loading="lazy"` | load it eagerly |
//! | `assets::too-many-high-priority` | ours | more `fetchpriority="high"` elements than `max_high_priority` | keep it for the LCP image |
//! | `assets::too-many-preloads` | ours | more `<link rel="preload">` than `max_preloads` | preload only what the first paint needs |
//! | `assets::font-display` | yes | an `@font-face` has no `font-display`, or one other than `swap`, `optional` or `fallback` (the values Lighthouse accepts) | `font-display: swap` or `optional` |
//! | `assets::font-format` | ours | the first `url()` of an `@font-face` (the file browsers download), or a preloaded font, is not WOFF2 by its bytes | convert to WOFF2 |
//! | `assets::font-size` | ours | a font file is over `max_font` | subset it |
//! | `assets::too-many-font-files` | ours | a document loads more `@font-face` files than `max_font_files` | fewer faces, or a variable font |
//! | `assets::too-many-font-weights` | ours | a document loads more weights of one family than `max_font_weights` | fewer weights, or a variable font |
//! | `assets::missing-asset` | ours | a local reference names a file that is not in the folder, or points above it | fix the reference |
//! | `assets::unreadable-asset` | ours | an image or font is truncated or corrupt (its structure ends before the file does, or its header cannot be read), or is not an image or font by its bytes | rebuild the file |
//!
//! What is not audited: `http:`, `https:`, `//host` and `data:` URLs (their bytes are not in the
//! folder); CSS background images; `@import`; sizes set in style sheets rather than on the
//! element; `<base href>`.
//!
//! ```no_run
//! use std::path::Path;
//! use policy_lang::AssetsSpec;
//!
//! let report = policy_cli::assets::audit(Path::new("web/dist"), &AssetsSpec::default())?;
//! for finding in &report.findings {
//!     eprintln!("{}", report.render_plain(finding));
//! }
//! assert!(report.is_clean());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};

use policy_lang::{AssetsSpec, PolicySet};

use crate::{Exit, Format, check, render};

mod audit;
mod css;
mod html;
pub mod media;
mod report;

pub use audit::{ASPECT_RATIO_TOLERANCE_PX, MODERN_FORMAT_MIN_BYTES, audit};
pub use report::{Finding, Renderable, Report, Rule};

/// Arguments of `policy assets`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The built folder to audit; by default the `dir` of the policy's `assets` stanza,
    /// relative to its policy file.
    pub folder: Option<PathBuf>,
    /// Policy files, or directories of them, holding the `assets` stanza; without one the
    /// defaults apply.
    #[arg(long = "policy", value_name = "FILE")]
    pub policies: Vec<PathBuf>,
    /// Which `assets` stanza, when the policy has several.
    #[arg(long)]
    pub name: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

/// The stanza to audit against and the folder its `dir` names, if any.
fn choose(
    set: &PolicySet,
    args: &Args,
    err: &mut dyn Write,
) -> Result<(AssetsSpec, Option<PathBuf>), Exit> {
    let stanzas = &set.spec().assets;
    let dir_of = |stanza: &AssetsSpec| -> Option<PathBuf> {
        let dir = stanza.dir.as_ref()?;
        let file = set.sources().get(stanza.loc.source()?)?;
        let base = Path::new(file.name()).parent().unwrap_or(Path::new(""));
        Some(base.join(&dir.value))
    };
    let chosen = if let Some(name) = &args.name {
        match stanzas.get(name) {
            Some(stanza) => stanza,
            None => {
                let help = policy_lang::suggest::did_you_mean(
                    name,
                    stanzas.names(),
                    "the `assets` stanzas",
                    "the policy has no `assets` stanza",
                );
                let _ = writeln!(err, "error: no `assets {name}` stanza\n  help: {help}");
                return Err(Exit::Usage);
            }
        }
    } else {
        match stanzas.len() {
            0 => {
                if !args.policies.is_empty() {
                    let _ = writeln!(
                        err,
                        "note: the policy has no `assets` stanza: auditing with the defaults"
                    );
                }
                return Ok((AssetsSpec::default(), None));
            }
            1 => match stanzas.iter().next() {
                Some(stanza) => stanza,
                None => return Ok((AssetsSpec::default(), None)),
            },
            _ => {
                let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                };
                let by_folder = args.folder.as_ref().and_then(|folder| {
                    stanzas
                        .iter()
                        .find(|stanza| dir_of(stanza).is_some_and(|dir| same(&dir, folder)))
                });
                match by_folder {
                    Some(stanza) => stanza,
                    None => {
                        let names: Vec<String> =
                            stanzas.names().map(|name| format!("`{name}`")).collect();
                        let _ = writeln!(
                            err,
                            "error: the policy has {} `assets` stanzas ({}) and none has this folder as its `dir`\n  help: choose one with `--name NAME`",
                            stanzas.len(),
                            names.join(", ")
                        );
                        return Err(Exit::Usage);
                    }
                }
            }
        }
    };
    Ok((chosen.clone(), dir_of(chosen)))
}

/// Runs `policy assets`.
pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let set = if args.policies.is_empty() {
        PolicySet::new()
    } else {
        let (set, _) =
            match check::load_valid(&args.policies, "policy assets: the policy has ", err) {
                Ok(loaded) => loaded,
                Err(exit) => return exit,
            };
        set
    };
    let (spec, stanza_dir) = match choose(&set, args, err) {
        Ok(chosen) => chosen,
        Err(exit) => return exit,
    };
    let Some(folder) = args.folder.clone().or(stanza_dir) else {
        let _ = writeln!(
            err,
            "error: no folder to audit\n  help: name it, `policy assets web/dist`, or set `dir = \"web/dist\"` in the `assets` stanza"
        );
        return Exit::Usage;
    };
    let report = match audit(&folder, &spec) {
        Ok(report) => report,
        Err(error) => {
            let _ = writeln!(err, "{}", crate::files::io_error(&folder, &error));
            return Exit::Usage;
        }
    };
    if report.documents == 0 {
        let _ = writeln!(
            err,
            "error: no `.html` documents under `{}`\n  help: audit the built output (the folder the server serves), not the sources",
            folder.display()
        );
        return Exit::Usage;
    }
    match args.format {
        Format::Human => {
            for finding in &report.findings {
                let _ = writeln!(err, "{}", render::human_of(&report.renderable(finding)));
            }
            let _ = writeln!(
                err,
                "policy assets: {} in {} ({}, {}) under `{}`",
                render::plural(report.findings.len(), "finding"),
                render::plural(report.documents, "document"),
                render::plural(report.images, "image"),
                render::plural(report.fonts, "font"),
                folder.display()
            );
        }
        Format::Json => {
            let _ = writeln!(out, "{:#}", report.to_json());
        }
    }
    if report.is_clean() {
        Exit::Clean
    } else {
        Exit::Problems
    }
}
