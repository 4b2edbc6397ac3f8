//! One call of an annotated operation ([`Traced`]): polled inside its span, with its
//! operation in scope for the mechanisms' events, its caller noted in the registry's observed
//! tree at its first poll, and measured for its operation's metrics (feature `metrics`) and the
//! dashboard's history (feature `dashboard`).
//!
//! It sits above what it ties together: the operation's [`Calls`] record, the mechanisms'
//! notes on the call ([`observe`]), the deadline in scope and the [`Registry`]; none of them
//! names it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

use crate::Deadline;
use crate::calls::Calls;
use crate::calls::meter::Meter;
use crate::observe::{self, CallOutput};
use crate::registry::{Registry, entry_caller};

/// Notes who called this call of `calls`' operation: `parent`, the operation being polled on
/// this thread when it started, or none (an entry point, with a deadline in scope or not).
/// The first call from a caller records the edge in the registry; every later one finds it in
/// one of the operation's slots.
#[inline]
fn called_by(calls: &'static Calls, parent: Option<&'static str>) {
    let parent = match parent {
        Some(parent) => parent,
        None => entry_caller(Deadline::current().is_some()),
    };
    if calls.new_caller(parent) {
        Registry::global().note_call(parent, calls);
    }
}

pin_project! {
    /// A call of an annotated function: polled inside its span, with its operation in scope
    /// for the mechanisms' events, its caller noted at its first poll (the operation polled
    /// around it, or none), and measured for its operation's metrics and history.
    #[must_use = "futures do nothing unless polled"]
    pub struct Traced<F> {
        calls: &'static Calls,
        span: tracing::Span,
        meter: Meter,
        started: bool,
        #[pin]
        inner: F,
    }
}

impl<F> Traced<F> {
    pub(crate) fn new(calls: &'static Calls, span: tracing::Span, inner: F) -> Self {
        Self {
            calls,
            span,
            meter: Meter::default(),
            started: false,
            inner,
        }
    }
}

impl<F> fmt::Debug for Traced<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Traced")
            .field("operation", &self.calls.operation())
            .finish_non_exhaustive()
    }
}

impl<F> Future for Traced<F>
where
    F: Future,
    F::Output: CallOutput,
{
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let outer = observe::enter_operation(this.calls.operation());
        if !*this.started {
            // Its caller: the operation polled around it when it starts. Once per call, a
            // load and a comparison per remembered caller; nothing allocated once known.
            *this.started = true;
            called_by(this.calls, outer);
        }
        // Its clock started when someone listens; the enclosing call's mark put aside.
        let saved = this.meter.before(this.calls);
        let poll = this.inner.poll(cx);
        observe::leave_operation(outer);
        let error_type = this.meter.after(this.calls, saved, &poll);
        if let Poll::Ready(output) = &poll
            && !output.succeeded()
            && !this.span.is_disabled()
        {
            // OpenTelemetry's conventions for a span that ended in error (through
            // `tracing-opentelemetry`): its status, and the class of error.
            this.span.record("otel.status_code", "ERROR");
            this.span.record("error.type", error_type);
        }
        poll
    }
}
