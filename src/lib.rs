#![doc = include_str!("lib.md")]
#![doc = "\n# Feature flags\n\n"]
#![doc = include_str!("features.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod guide;

/// The README's examples, compiled and run as doctests (the crate docs are `lib.md`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

// The face: a chosen list, not the runtime's `*` (`.ci/public-items.sh` counts it). Whatever
// is left out stays in `velocity-policy-runtime`, documented there.

// The attributes.
pub use velocity_policy_macros::{
    background, critical, deferred, idempotent, isolate, operation, resilient,
};

/// A `.policy` operation as a tower layer, over the registry entries the attributes use:
/// `velocity_policy::operation_layer!("index_document")`. See [`layer::OperationLayer`].
#[cfg(feature = "tower")]
pub use velocity_policy_macros::operation_layer;

// The request's budget, and the errors that say whether the work ran.
pub use velocity_policy_runtime::{
    CallError, Deadline, DeadlineExceeded, RefusalKind, RefusalReason, ResilienceError,
};
// Shortcuts to items documented in their modules: one item, one page (the count is of items).
#[doc(no_inline)]
pub use velocity_policy_runtime::{AfterResponse, OpenCause, RetryAllowance, Sharing, ShedReason};
// Each mechanism's type (its builder, settings and snapshot are in its module), and the
// registry they share with the layers.
pub use velocity_policy_runtime::{
    Breaker, Bulkhead, Idempotent, Registry, RetryPolicy, Shedder, Snapshot, Transient, WorkClass,
    retry_within,
};
// Work the caller does not wait for: each a function and a module of the same name.
#[cfg(feature = "http")]
#[doc(no_inline)]
pub use velocity_policy_runtime::AfterResponseLayer;
pub use velocity_policy_runtime::{background, defer};

// One module per mechanism.
pub use velocity_policy_runtime::{
    breaker, bulkhead, criticality, deadline, fallback, hedge, isolate, limiter, observe, queue,
    retry, shedding,
};
#[cfg(feature = "tower")]
pub mod layer;

// The optional modules, each behind its feature.
#[cfg(feature = "delivery")]
pub use velocity_policy_delivery::image_dimensions;
#[cfg(feature = "delivery")]
pub use velocity_policy_delivery::locality;
#[cfg(feature = "chaos")]
pub use velocity_policy_runtime::chaos;
#[cfg(feature = "http")]
pub use velocity_policy_runtime::client;
#[cfg(feature = "dashboard")]
pub use velocity_policy_runtime::dashboard;
#[cfg(feature = "tonic")]
pub use velocity_policy_runtime::grpc;
#[cfg(feature = "metrics")]
pub use velocity_policy_runtime::otel;
#[cfg(feature = "overrides")]
pub use velocity_policy_runtime::overrides;
#[cfg(feature = "redis")]
pub use velocity_policy_runtime::redis_store;

// This crate under its package name, for attributes used inside it: their expansions write
// `::velocity_policy::__private<patch>::..`, the facade's name being "itself" here.
extern crate self as velocity_policy;

// What the expansions call: `src/private.rs`, public as `__private<patch>` (named by build.rs).
mod private;
include!(concat!(env!("OUT_DIR"), "/private.rs"));

/// The crate docs' "Feature flags" table is checked in (`src/features.md`) rather than rendered
/// by `document-features` in every build, whose proc macro would be one more crate in a
/// user's first build; this keeps it what `document_features!()` renders from the `## `
/// comments in `Cargo.toml`. `POLICY_BLESS=1 cargo test -p velocity-policy --lib features_table`
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
