//! `isolate` without the `rayon` feature: no dedicated pool. An attribute's `pool = "rayon"`
//! does not compile ([`RayonFeature`] says how to turn the feature on); a builder given
//! [`PoolKind::Rayon`] by hand runs its work on tokio's blocking pool, and says so in a log
//! event, as when a rayon pool cannot start its threads. With the feature, `dedicated.rs` has
//! the same items.

use super::PoolKind;

/// Whether the `rayon` feature is on, for an expansion's `pool = "rayon"`: it is not.
#[diagnostic::on_unimplemented(
    message = "`pool = \"rayon\"` needs the `rayon` feature of `policy`",
    label = "a rayon pool is asked for here",
    note = "turn it on in Cargo.toml: `policy = {{ version = \"..\", features = [\"rayon\"] }}`, or use the default pool (tokio's blocking pool)"
)]
pub trait RayonFeature {}

/// No pool's own threads.
pub(super) struct Dedicated;

impl Dedicated {
    /// Nothing to start; a rayon pool asked for by hand says, once, where its work runs.
    pub(super) fn start(kind: PoolKind, name: &str, _max_concurrent: u32) -> Self {
        if kind == PoolKind::Rayon {
            tracing::error!(
                target: "policy",
                kind = "isolate_pool",
                name,
                reason = "feature_off",
                "pool `{name}` asks for a rayon pool, which needs the `rayon` feature of `policy`; using tokio's blocking pool"
            );
        }
        Self
    }

    /// Gives `job` back: it runs on tokio's blocking pool.
    #[inline]
    pub(super) fn spawn<J: FnOnce() + Send + 'static>(&self, job: J) -> Option<J> {
        Some(job)
    }
}
