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
        inner: Inner<B>,
    }
}

pin_project! {
    // One tag for both cases (an empty body has no deadline either): the response that carries
    // it is a word smaller, and it is moved on every call.
    #[project = InnerProj]
    enum Inner<B> {
        Scoped { #[pin] body: B, deadline: Deadline },
        Empty,
    }
}

impl<B> DeadlineBody<B> {
    pub(super) fn new(body: B, deadline: Deadline) -> Self {
        Self {
            inner: Inner::Scoped { body, deadline },
        }
    }

    pub(super) fn empty() -> Self {
        Self {
            inner: Inner::Empty,
        }
    }
}

impl<B> fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let deadline = match &self.inner {
            Inner::Scoped { deadline, .. } => Some(deadline),
            Inner::Empty => None,
        };
        f.debug_struct("DeadlineBody")
            .field("deadline", &deadline)
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
        match self.project().inner.project() {
            InnerProj::Scoped { body, deadline } => deadline.sync_scope(|| body.poll_frame(cx)),
            InnerProj::Empty => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Scoped { body, .. } => body.is_end_stream(),
            Inner::Empty => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Scoped { body, .. } => body.size_hint(),
            Inner::Empty => SizeHint::with_exact(0),
        }
    }
}
