#![doc = include_str!("../README.md")]
#![doc = "\n# Feature flags\n\n"]
#![doc = document_features::document_features!()]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

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

// This crate under its package name, for attributes used inside it: their expansions write
// `::policy::__private<patch>::..`, the facade's name being "itself" here.
extern crate self as policy;

// What the expansions call: `src/private.rs`, public as `__private<patch>` (named by build.rs).
mod private;
include!(concat!(env!("OUT_DIR"), "/private.rs"));
