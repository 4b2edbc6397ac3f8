//! `policy assets [FOLDER]`: audit what a built front end ships, its images and fonts, against
//! the ceilings of an `assets` stanza (or the defaults), and against what Lighthouse would say
//! of each page.
//!
//! The audit reads every `.html` document under the folder, builds its tree, applies its style
//! sheets (linked, `@import`ed and inline, parsed with `cssparser`; selectors matched with
//! `selectors`, the engine of Servo and Firefox) and works out, for the phone Lighthouse
//! emulates by default (412 × 823 CSS pixels at 1.75 device pixels per CSS pixel), which image
//! file each `<img>` downloads (its `<picture>` sources and `srcset`, as Chrome picks), which
//! CSS backgrounds the rendered elements load, which `@font-face` faces the page's text needs
//! (and which `src` of each a browser downloads), and roughly where everything lands on the
//! page. Formats come from the files' bytes, never their names. [`audit`] is the library entry
//! point (`policy gate` calls it too); each finding names its rule, the file it is about, the
//! document (or style sheet), line and column, and the fix.
//!
//! # Rules
//!
//! A rule's id is the Lighthouse audit's where the rule is that audit, so a finding can be
//! looked up in a Lighthouse report; the others are ours. Counts are per document.
//!
//! | code | Lighthouse audit | fires when | the fix |
//! |---|---|---|---|
//! | `policy::assets::uses-optimized-images` | `uses-optimized-images` | a downloaded JPEG (an `<img>`'s or a background) whose re-encode at quality 92, estimated from its quantisation tables, subsampling and data size, is at least 4 KiB smaller; the message gives its quality and the size at quality 85, and says when it is also shown far smaller than its pixels (resizing is then the bigger saving) | re-encode at quality 85, 4:2:0, no metadata |
//! | `policy::assets::image-size` | none | an image file is over `max_image`; a well-encoded JPEG (quality 86 or less) is said to need resizing or a modern format, not re-encoding | resize it, or AVIF/WebP |
//! | `policy::assets::modern-image-formats` | `modern-image-formats` | a downloaded PNG or JPEG whose AVIF, estimated as Lighthouse estimates it (half the quality-92 JPEG and 80% of the quality-85 WebP, averaged; ours from the JPEG's headers, or 45% of a true-colour PNG), is at least 8 KiB smaller, with no AVIF or WebP sibling of the same stem | serve `NAME.avif`/`NAME.webp` or a `<picture>` source |
//! | `policy::assets::unsized-images` | `unsized-images` | a rendered, in-flow `<img>` whose width and height (or one of them and `aspect-ratio`) are set by neither attributes nor the cascade; an attribute counts as Lighthouse reads it (leading digits, so `50%` too) | add both, the help gives the file's size |
//! | `policy::assets::image-aspect-ratio` | `image-aspect-ratio` | the box an `<img>` is drawn in (attributes and cascade, `object-fit: fill`) has a height 2 px or more from what its width and the file's ratio give; where the width depends on a container we estimate, only when the image is too tall even at the widest that container can be | fix the height, `height: auto`, or `object-fit` |
//! | `policy::assets::uses-responsive-images` | `uses-responsive-images` | the downloaded file has more pixels than its box needs at 1.75 device pixels per CSS pixel, by more than 4 KiB of its bytes (12 KiB with a `srcset` or `<picture>`); the box is at most the estimated width, so the waste is never overstated | a smaller candidate in `srcset`, with `sizes` |
//! | `policy::assets::srcset-sizes` | none | a `srcset` with width descriptors and no `sizes` | add `sizes` |
//! | `policy::assets::lcp-lazy-loaded` | `lcp-lazy-loaded` | the likely LCP element is an `<img>` with `loading="lazy"` | load it eagerly |
//! | `policy::assets::lcp-fetchpriority` | `lcp-discovery-insight` (its `fetchpriority=high` check) | the likely LCP element is an `<img>` without `fetchpriority="high"`, or a CSS background without a `<link rel="preload" as="image" fetchpriority="high">` | add it |
//! | `policy::assets::offscreen-images` | `offscreen-images` | an estimate: an `<img>` with no `loading` attribute, of 2 KiB or more, that the layout estimate puts five screens or more down the page | `loading="lazy"` |
//! | `policy::assets::too-many-high-priority` | none | more `fetchpriority="high"` elements than `max_high_priority` | keep it for the LCP image |
//! | `policy::assets::too-many-preloads` | none | more `<link rel="preload">` than `max_preloads` | preload only what the first paint needs |
//! | `policy::assets::font-display` | `font-display-insight` | a face the page uses has `font-display` `block`, `fallback`, `auto` or none: only `swap` and `optional` pass | `font-display: swap` or `optional` |
//! | `policy::assets::font-format` | none | the file a browser downloads for a used face (the first `src` whose `format()` it reads, skipping a missing one as the browser does), or a preloaded font, is not WOFF2 by its bytes | convert to WOFF2 |
//! | `policy::assets::font-size` | none | a downloaded font file is over `max_font` | subset it |
//! | `policy::assets::too-many-font-files` | none | a document uses more faces (files) than `max_font_files` | fewer faces, or a variable font |
//! | `policy::assets::too-many-font-weights` | none | a document uses more weights of one family than `max_font_weights` | fewer weights, or a variable font |
//! | `policy::assets::missing-asset` | none | a file a browser requests (a linked or imported style sheet, an image candidate, a background, the font source it gets to) is not in the folder, or points above it | fix the reference |
//! | `policy::assets::unreadable-asset` | none | an image or font is truncated or corrupt (its structure ends before the file does, or its header cannot be read), or is not an image or font by its bytes | rebuild the file |
//!
//! ## The likely LCP element
//!
//! The largest image, CSS background or text block that the layout estimate puts on the first
//! screen, by visible area (declared or intrinsic size, clipped to the screen), as Chrome picks
//! its largest contentful paint; images carrying under 0.05 bits per pixel and backgrounds that
//! fill the whole screen are not candidates, as in Chrome. When the largest is text, the LCP
//! rules have nothing to say.
//!
//! ## The layout estimate
//!
//! A walk of the document in order: blocks stack, text is set at half an em per character in
//! lines 1.5 em apart, images are sized from their attributes, the cascade and their files,
//! grid and flex rows sit side by side as far as the style sheet says how many columns there
//! are, and horizontal margins and padding in known lengths narrow the boxes inside. It is not
//! a browser: positions far down the page can be off by a screen, which is why
//! `offscreen-images` waits for five screens (Lighthouse counts from four) and says it
//! estimates, and why lazy images are audited only within 1,000 px of the first screen (Chrome
//! fetches them from 1,250 px).
//!
//! ## Where we differ from Lighthouse, deliberately
//!
//! - `font-display` follows Lighthouse's newer font-display insight (also Chrome DevTools'),
//!   which reports `block` and `fallback` as well as no value: both hide text. Lighthouse's
//!   older `font-display` audit passes `block` and `fallback`; for pages that use them this rule
//!   agrees with the insight and not with that audit.
//! - Estimates err on the side of saying nothing: a re-encode's size is estimated on the high
//!   side (the largest ratio measured on re-encoded photographs), a box's width on the wide
//!   side. A saving just above Lighthouse's threshold can go unreported.
//! - An AVIF or WebP file next to a PNG or JPEG, with the same stem, counts as an alternative
//!   (a server can negotiate it); Lighthouse, loading the page from a server that does not,
//!   still reports the PNG or JPEG.
//! - A JPEG whose quantisation tables are not libjpeg's standard ones scaled (some encoders
//!   tune them) gets no estimate, so neither `uses-optimized-images` nor
//!   `modern-image-formats` reports it: its quality cannot be read from them reliably.
//! - An image shown on the first screens by one element is not offscreen because another
//!   element (a closed dialog, the page's end) loads the same file: it is downloaded once.
//! - GIFs are not in `modern-image-formats` (nor in Lighthouse's: its
//!   `efficient-animated-content` covers them).
//! - `offscreen-images`: Lighthouse lists an offscreen image only if its request started
//!   before the page's last long task in its simulated load, which depends on the network
//!   queue; we report every eager image far enough down. The comparison below judges ours
//!   against that audit's own measurement on Chromium's layout, before its timing filter.
//! - A family named in `font-family` that no `@font-face` declares is taken as not installed
//!   (the next family is tried), and `local()` sources as absent.
//!
//! ## Agreement with Lighthouse
//!
//! <!-- agreement: computed by velocity-policy-delivery/tests/lighthouse.rs -->
//! Measured on the 9 pages of `velocity-policy-delivery/tests/fixtures/lighthouse` against Lighthouse 12.8 (mobile, headless Chromium), by `tests/lighthouse.rs`:
//!
//! | rule | Lighthouse audit | agree | ours only | Lighthouse only | false positives |
//! |---|---|---|---|---|---|
//! | `uses-optimized-images` | `uses-optimized-images` | 5 | 0 | 0 | 0 |
//! | `modern-image-formats` | `modern-image-formats` | 16 | 0 | 6 | 0 |
//! | `uses-responsive-images` | `uses-responsive-images` | 24 | 0 | 0 | 0 |
//! | `unsized-images` | `unsized-images` | 6 | 0 | 0 | 0 |
//! | `image-aspect-ratio` | `image-aspect-ratio` | 2 | 0 | 0 | 0 |
//! | `offscreen-images` | `offscreen-images` (its measurement on Chromium's layout, before its timing filter) | 4 | 0 | 1 | 0 |
//! | `lcp-lazy-loaded` | `lcp-lazy-loaded` | 1 | 0 | 0 | 0 |
//! | `lcp-fetchpriority` | `lcp-discovery-insight` | 7 | 0 | 0 | 0 |
//! | `font-display` | `font-display-insight` | 6 | 0 | 0 | 0 |
//! | our own rules (`font-format` 2, `image-size` 2, `too-many-font-files` 4) | none | 0 | 8 | 0 | 0 |
//! | **all** | | **71** | **8** | **7** | **0** |
//!
//! 91% of Lighthouse's findings in these rules are ours too.
//! <!-- end of agreement -->
//!
//! What is not audited: `http:`, `https:`, `//host` and `data:` URLs (their bytes are not in the
//! folder), `<base href>`, `@container` rules, `image-set()` choices (every URL in a
//! background counts), and what scripts add to the page.
//!
//! ```no_run
//! use std::path::Path;
//! use velocity_policy_lang::AssetsSpec;
//!
//! let report = velocity_policy_delivery::assets::audit(Path::new("web/dist"), &AssetsSpec::default())?;
//! for finding in &report.findings {
//!     eprintln!("{}", report.render_plain(finding));
//! }
//! assert!(report.is_clean());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::path::{Path, PathBuf};

use velocity_policy_lang::{AssetsSpec, PolicySet};

mod audit;
mod html;
pub mod media;
mod report;
mod style;

pub use audit::{ASPECT_RATIO_TOLERANCE_PX, MODERN_FORMAT_MIN_BYTES, audit};
pub use report::{Finding, PageAssets, Renderable, Report, Rule};

/// The folder an `assets` stanza's `dir` names, relative to the policy file of `set` that
/// declares it (as written, for a stanza from no file); `None` without a `dir`.
#[must_use]
pub fn stanza_folder(set: &PolicySet, stanza: &AssetsSpec) -> Option<PathBuf> {
    let dir = stanza.dir.as_ref()?;
    let base = stanza
        .loc
        .source()
        .and_then(|source| set.sources().get(source))
        .and_then(|file| Path::new(file.name()).parent().map(Path::to_path_buf))
        .unwrap_or_default();
    Some(base.join(&dir.value))
}

/// The `assets` stanza an audit is judged against, chosen by [`choose`].
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The stanza, or the defaults when the policy has none.
    pub spec: AssetsSpec,
    /// The folder its `dir` names ([`stanza_folder`]), if any.
    pub folder: Option<PathBuf>,
    /// Whether `spec` is the defaults because the policy has no `assets` stanza.
    pub defaults: bool,
}

/// Why no `assets` stanza could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChooseError {
    /// The name asked for is not a stanza of the policy.
    #[error("no `assets {name}` stanza")]
    UnknownName {
        /// The name asked for.
        name: String,
        /// A "did you mean", or the list of stanzas.
        help: String,
    },
    /// Several stanzas, no name asked for, and none has the folder as its `dir`.
    #[error(
        "the policy has {count} `assets` stanzas ({names}) and none has this folder as its `dir`"
    )]
    Ambiguous {
        /// How many stanzas.
        count: usize,
        /// Their names, in backticks.
        names: String,
    },
}

impl ChooseError {
    /// The fix.
    #[must_use]
    pub fn help(&self) -> &str {
        match self {
            ChooseError::UnknownName { help, .. } => help,
            ChooseError::Ambiguous { .. } => "choose one with `--name NAME`",
        }
    }
}

/// The stanza of `set` to audit against: the one called `name`; else the only one; else the
/// one whose `dir` is `folder`; the defaults when the policy has none.
pub fn choose(
    set: &PolicySet,
    name: Option<&str>,
    folder: Option<&Path>,
) -> Result<Chosen, ChooseError> {
    let stanzas = &set.spec().assets;
    let chosen = |stanza: &AssetsSpec| Chosen {
        spec: stanza.clone(),
        folder: stanza_folder(set, stanza),
        defaults: false,
    };
    let defaults = Chosen {
        spec: AssetsSpec::default(),
        folder: None,
        defaults: true,
    };
    if let Some(name) = name {
        return match stanzas.get(name) {
            Some(stanza) => Ok(chosen(stanza)),
            None => Err(ChooseError::UnknownName {
                name: name.to_owned(),
                help: velocity_policy_lang::suggest::did_you_mean(
                    name,
                    stanzas.names(),
                    "the `assets` stanzas",
                    "the policy has no `assets` stanza",
                ),
            }),
        };
    }
    match stanzas.len() {
        0 => Ok(defaults),
        1 => Ok(stanzas.iter().next().map_or(defaults, chosen)),
        _ => {
            let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
                (Ok(a), Ok(b)) => a == b,
                _ => false,
            };
            let by_folder = folder.and_then(|folder| {
                stanzas
                    .iter()
                    .find(|stanza| stanza_folder(set, stanza).is_some_and(|dir| same(&dir, folder)))
            });
            match by_folder {
                Some(stanza) => Ok(chosen(stanza)),
                None => {
                    let names: Vec<String> =
                        stanzas.names().map(|name| format!("`{name}`")).collect();
                    Err(ChooseError::Ambiguous {
                        count: stanzas.len(),
                        names: names.join(", "),
                    })
                }
            }
        }
    }
}
