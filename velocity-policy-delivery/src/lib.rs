//! What the build and the edge deliver, beside `policy`'s mechanisms.
//!
//! `velocity-policy-runtime` holds the mechanisms (deadline, breaker, bulkhead, shedding, retry,
//! deferred and background work) and nothing else. This crate holds the other product that
//! shares the `.policy` grammar, the one about what a service delivers and from where; the
//! `policy` command is a thin front over it (`policy assets`, `policy gate`, `policy locality`):
//!
//! | module | feature | what it is |
//! |---|---|---|
//! | `locality` | `locality` | the locality probe: which region the compute and each service named in the environment run in; regions only, never a host or a credential |
//! | `locality::hops` | `hops` | the hops a policy's `locality` stanza declares, judged against the probe's map |
//! | `image_dimensions` | `html-dimensions` | a tower layer that gives the `<img>` elements of HTML responses the `width` and `height` they lack, from a manifest of image sizes read at startup |
//! | `assets` | `audit` | the asset audit of a built front end: its images and fonts against an `assets` stanza, and against what Lighthouse would say of each page |
//! | `gate` | `gate` | size and count ceilings with a ratchet, quarantined crates, and the asset audit of every `assets` stanza |
//! | [`site`] | always | URLs written in a page, resolved to the file they name: in a folder (the asset audit) or under a request path (the layer) |
//! | [`html`] | always | `width` and `height` read as browsers read them |
//!
//! The heavy dependencies stay behind the features: `lol_html`, `imagesize`, `url` and
//! `secrecy` behind the two a service may turn on, and the asset audit's and the gate's CSS
//! parser, selector engine, binary reader, compressor and globs behind `audit` and `gate`,
//! which only the command turns on. The facade (`policy`) depends on this crate only through
//! its own `locality` and `html-dimensions` features, so neither the runtime nor a default
//! build of `policy` compiles any of them: the project's gate (`policies/project.policy`)
//! checks it.
//!
//! ```
//! use std::path::{Path, PathBuf};
//! use velocity_policy_delivery::{html, site::Reference};
//!
//! // `<img src="../img/hero.png" width="640px">` in `blog/post.html` of a built site:
//! let src = Reference::parse("../img/hero.png").unwrap();
//! assert_eq!(src.in_folder(Path::new("blog")), Some(PathBuf::from("img/hero.png")));
//! // ... and the same page served at `/blog/post.html`:
//! assert_eq!(src.in_url_dir("/blog/"), "/img/hero.png");
//! assert_eq!(html::dimension("640px"), Some(640.0));
//! ```
//!
//! # Memory
//!
//! Nothing here grows with traffic: the image manifest is built once at startup from the files
//! given and fixed after, a response's rewriting holds at most one unfinished tag
//! (`ImageDimensionsLayer::max_buffered`, 1 MiB by default), and the locality map has one row per service named in the environment.
//!
//! # Feature flags
//!
#![doc = include_str!("features.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

#[cfg(feature = "audit")]
pub mod assets;
#[cfg(feature = "gate")]
pub mod gate;
pub mod html;
#[cfg(feature = "html-dimensions")]
pub mod image_dimensions;
#[cfg(feature = "locality")]
pub mod locality;
pub mod site;

#[cfg(feature = "html-dimensions")]
pub use image_dimensions::{ImageDimensionsLayer, ImageManifest};

/// The crate docs' "Feature flags" table is checked in (`src/features.md`) rather than rendered
/// by `document-features` in every build, whose proc macro would be one more crate in a
/// user's first build; this keeps it what `document_features!()` renders from the `## `
/// comments in `Cargo.toml`. `POLICY_BLESS=1 cargo test -p velocity-policy-delivery --lib features_table`
/// rewrites it.
#[cfg(test)]
#[test]
fn the_features_table_is_what_cargo_toml_says() {
    let rendered = document_features::document_features!();
    if std::env::var_os("POLICY_BLESS").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/features.md");
        assert!(
            std::fs::write(path, rendered).is_ok(),
            "cannot write {path}"
        );
    }
    assert_eq!(
        include_str!("features.md"),
        rendered,
        "src/features.md is not the table Cargo.toml's `## ` comments give: rerun with POLICY_BLESS=1"
    );
}
