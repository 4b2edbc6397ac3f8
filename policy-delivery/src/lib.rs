//! What the build and the edge deliver, beside `policy`'s mechanisms.
//!
//! `policy-runtime` holds the mechanisms (deadline, breaker, bulkhead, shedding, retry,
//! deferred and background work) and nothing else. This crate holds the other product that
//! shares the `.policy` grammar, the one about what a service delivers and from where:
//!
//! | module | feature | what it is |
//! |---|---|---|
//! | `locality` | `locality` | the locality probe: which region the compute and each service named in the environment run in; regions only, never a host or a credential |
//! | `image_dimensions` | `html-dimensions` | a tower layer that gives the `<img>` elements of HTML responses the `width` and `height` they lack, from a manifest of image sizes read at startup |
//! | [`site`] | always | URLs written in a page, resolved to the file they name: in a folder (the asset audit) or under a request path (the layer) |
//! | [`html`] | always | `width` and `height` read as browsers read them |
//!
//! The heavy dependencies (`lol_html`, `imagesize`, `url`, `secrecy`) stay behind the
//! features, and the facade (`policy`) depends on this crate only through its own `locality`
//! and `html-dimensions` features, so neither the runtime nor a default build of `policy`
//! compiles them: the project's gate (`policies/project.policy`) checks it. `policy locality`
//! prints the probe's map, and `policy assets` resolves references with [`site`].
//!
//! ```
//! use std::path::{Path, PathBuf};
//! use policy_delivery::{html, site::Reference};
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
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod html;
#[cfg(feature = "html-dimensions")]
pub mod image_dimensions;
#[cfg(feature = "locality")]
pub mod locality;
pub mod site;

#[cfg(feature = "html-dimensions")]
pub use image_dimensions::{ImageDimensionsLayer, ImageManifest};
