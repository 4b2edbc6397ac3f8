//! A crate that depends on the facade as `pol` (`pol = { package = "policy", .. }` in its
//! Cargo.toml) and uses the attributes under that name: their expansions find the facade
//! where this crate put it, and sibling attributes (`#[pol::idempotent]`) are recognised.
//! Its mechanisms are declared in `policies/catalog.policy`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use pol::{DeadlineExceeded, ResilienceError};

/// What the catalog calls return when they fail.
#[derive(Debug)]
pub enum CatalogError {
    /// The upstream failed (the caller asked it to).
    Upstream,
    /// A mechanism refused the call (the breaker, once open).
    Refused(ResilienceError),
    /// The deadline passed.
    TimedOut(DeadlineExceeded),
}

impl From<ResilienceError> for CatalogError {
    fn from(e: ResilienceError) -> Self {
        Self::Refused(e)
    }
}

impl From<DeadlineExceeded> for CatalogError {
    fn from(e: DeadlineExceeded) -> Self {
        Self::TimedOut(e)
    }
}

impl pol::Transient for CatalogError {
    fn is_transient(&self) -> bool {
        matches!(self, Self::Upstream)
    }
}

/// Critical work under a deadline of its own.
///
/// # Errors
///
/// [`CatalogError::TimedOut`] when `work` takes longer than 500ms.
#[pol::critical(deadline = "500ms")]
pub async fn price(work: std::time::Duration) -> Result<u32, CatalogError> {
    tokio::time::sleep(work).await;
    Ok(42)
}

/// Behind the file's `catalog` breaker, retried by its `transient` policy: fails the first
/// `failures` calls, counting each in `calls`.
///
/// # Errors
///
/// [`CatalogError::Upstream`] when every attempt failed, [`CatalogError::Refused`] once the
/// breaker is open.
#[pol::resilient(breaker = "catalog", retry = "transient", deadline = "2s")]
#[pol::idempotent]
pub async fn stock(calls: Arc<AtomicU32>, failures: u32) -> Result<u32, CatalogError> {
    let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
    if call <= failures {
        Err(CatalogError::Upstream)
    } else {
        Ok(call)
    }
}

/// Deferred work: scheduled by the call, run after it returned; says so on `done`.
#[pol::deferred]
#[pol::idempotent]
pub async fn reindex(done: Arc<tokio::sync::Notify>) {
    done.notify_one();
}
