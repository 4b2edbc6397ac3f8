//! `isolate`'s dedicated rayon pool (feature `rayon`). Without the feature, `no_rayon.rs` has
//! the same items: no pool starts, and an attribute that asks for one does not compile.

use super::PoolKind;

/// Whether the `rayon` feature is on, for an expansion's `pool = "rayon"`: it is.
#[diagnostic::on_unimplemented(
    message = "`pool = \"rayon\"` needs the `rayon` feature of `policy`",
    label = "a rayon pool is asked for here",
    note = "turn it on in Cargo.toml: `policy = {{ version = \"..\", features = [\"rayon\"] }}`, or use the default pool (tokio's blocking pool)"
)]
pub trait RayonFeature {}

impl RayonFeature for () {}

/// A pool's own threads, when its kind is [`PoolKind::Rayon`].
pub(super) struct Dedicated(Option<rayon::ThreadPool>);

impl Dedicated {
    /// Starts `max_concurrent` threads named after the pool `name` for a rayon pool; none for
    /// the blocking pool, nor when they cannot start (then it says so in a log event).
    pub(super) fn start(kind: PoolKind, name: &str, max_concurrent: u32) -> Self {
        if kind != PoolKind::Rayon {
            return Self(None);
        }
        let prefix = name.to_owned();
        match rayon::ThreadPoolBuilder::new()
            .num_threads(max_concurrent as usize)
            .thread_name(move |i| format!("{prefix}-{i}"))
            .build()
        {
            Ok(pool) => Self(Some(pool)),
            Err(error) => {
                tracing::error!(
                    target: "policy",
                    kind = "isolate_pool",
                    name,
                    reason = %error,
                    "could not start the dedicated pool; using tokio's blocking pool"
                );
                Self(None)
            }
        }
    }

    /// Runs `job` on the pool's own threads, or gives it back when it has none.
    pub(super) fn spawn<J: FnOnce() + Send + 'static>(&self, job: J) -> Option<J> {
        match &self.0 {
            Some(pool) => {
                pool.spawn(job);
                None
            }
            None => Some(job),
        }
    }
}
