use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::Deadline;

pin_project! {
    /// A response body polled with its request's deadline in scope, so work that streams the
    /// body (a database cursor, a call per chunk) takes children of the same deadline. The
    /// answer the layer gives itself has an empty one.
    pub struct DeadlineBody<B> {
        #[pin]
        inner: Option<B>,
        deadline: Option<Deadline>,
    }
}

impl<B> DeadlineBody<B> {
    pub(super) fn new(inner: B, deadline: Deadline) -> Self {
        Self {
            inner: Some(inner),
            deadline: Some(deadline),
        }
    }

    pub(super) fn empty() -> Self {
        Self {
            inner: None,
            deadline: None,
        }
    }
}

impl<B> fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineBody")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<B: Body> Body for DeadlineBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        match (this.inner.as_pin_mut(), this.deadline) {
            (Some(inner), Some(deadline)) => deadline.sync_scope(|| inner.poll_frame(cx)),
            (Some(inner), None) => inner.poll_frame(cx),
            (None, _) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}
