#![doc = include_str!("lib.md")]
#![doc = "\n# Feature flags\n\n"]
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod guide;

/// The README's examples, compiled and run as doctests (the crate docs are `lib.md`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub use policy_macros::{
    background, critical, deferred, idempotent, isolate, operation, resilient,
};
pub use policy_runtime::*;

/// A `.policy` operation as a tower layer, over the registry entries the attributes use:
/// `policy::operation_layer!("index_document")`. See [`layer::OperationLayer`].
#[cfg(feature = "tower")]
pub use policy_macros::operation_layer;

#[cfg(feature = "html-dimensions")]
pub use policy_delivery::image_dimensions::{self, ImageDimensionsLayer, ImageManifest};
#[cfg(feature = "locality")]
pub use policy_delivery::locality;

/// What the attribute macros' expansions call (the runtime's `__macro_support`). Not a
/// public API: its items may change in any release.
#[doc(hidden)]
pub use policy_runtime::__macro_support as __private;
