use axum_core::extract::FromRequestParts;
use axum_core::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;

use crate::Deadline;

/// The rejection of the [`Deadline`] extractor when no deadline is in scope (no
/// [`DeadlineLayer`](super::DeadlineLayer) around the route): a 500 that names the missing layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the `Deadline` extractor needs `DeadlineLayer`: add `.layer(DeadlineLayer::new(budget))` to the router, around the routes that read the deadline"
)]
pub struct MissingDeadlineLayer;

impl IntoResponse for MissingDeadlineLayer {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.to_string()).into_response()
    }
}

/// The request's deadline, for a handler that wants to read it or pass it on by hand.
impl<S: Send + Sync> FromRequestParts<S> for Deadline {
    type Rejection = MissingDeadlineLayer;

    async fn from_request_parts(_parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Deadline::current().ok_or(MissingDeadlineLayer)
    }
}
