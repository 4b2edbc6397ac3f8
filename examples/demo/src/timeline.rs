//! Did deferred work start after its response was finished? Recorded, not assumed.
//!
//! One sequence counter orders two kinds of events: a response body finishing (seen by a
//! middleware that wraps every response body, inside `policy::AfterResponseLayer`) and a deferred
//! task's body starting (recorded by its first line). Order is read from the numbers, never
//! from clocks.
//!
//! The middleware's body sits *inside* the layer's body, so it sees the end first: when the
//! connection takes the last frame (`poll_frame` returns `None`) or drops the body (hyper does
//! that for bodies of known length once it has their bytes), this body records the finish
//! before the layer releases the request's deferred work. A deferred task that records a
//! smaller number than its response's finish would have started before the response was
//! complete; the report counts those (it should always say 0).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};

/// The header a request's id is read from (the same one `AfterResponseLayer` reads).
pub const REQUEST_ID: &str = "x-request-id";

/// One request's id, in the request's extensions for handlers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestKey(pub Arc<str>);

/// A deferred task's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The request that deferred it.
    pub request: Arc<str>,
    /// The task's name.
    pub task: &'static str,
    /// Its place in the sequence.
    pub seq: u64,
}

#[derive(Debug, Default)]
struct Inner {
    seq: AtomicU64,
    unnamed: AtomicU64,
    finished: Mutex<HashMap<Arc<str>, u64>>,
    started: Mutex<Vec<Started>>,
}

/// The shared record. Cloning is cheap.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    inner: Arc<Inner>,
}

/// Deferred starts, compared with their responses' ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Tasks that started after their response was finished.
    pub after: u64,
    /// Tasks that started before their response was finished (never, if the layer keeps its
    /// promise).
    pub before: u64,
    /// Tasks whose request has no recorded finish (should be 0 too).
    pub unmatched: u64,
    /// Responses finished, of the requests counted.
    pub responses: u64,
    /// Starts per task name.
    pub by_task: Vec<(&'static str, u64)>,
}

// A poisoned lock means a panic elsewhere while it was held; the record is still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Timeline {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    fn next(&self) -> u64 {
        self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Records that `request`'s response body is finished.
    pub fn response_finished(&self, request: &Arc<str>) {
        let seq = self.next();
        lock(&self.inner.finished)
            .entry(request.clone())
            .or_insert(seq);
    }

    /// Records that the deferred task `task`, deferred by `request`, starts now.
    pub fn deferred_started(&self, request: &str, task: &'static str) {
        let seq = self.next();
        lock(&self.inner.started).push(Started {
            request: Arc::from(request),
            task,
            seq,
        });
    }

    /// Compares every deferred start of the requests `counted` selects with its response's
    /// finish.
    pub fn tally(&self, counted: impl Fn(&str) -> bool) -> Tally {
        let finished = lock(&self.inner.finished);
        let started = lock(&self.inner.started);
        let mut tally = Tally {
            responses: finished.keys().filter(|r| counted(r)).count() as u64,
            ..Tally::default()
        };
        let mut by_task: Vec<(&'static str, u64)> = Vec::new();
        for start in started.iter().filter(|s| counted(&s.request)) {
            match finished.get(&start.request) {
                Some(&end) if end < start.seq => tally.after += 1,
                Some(_) => tally.before += 1,
                None => tally.unmatched += 1,
            }
            match by_task.iter_mut().find(|(name, _)| *name == start.task) {
                Some((_, n)) => *n += 1,
                None => by_task.push((start.task, 1)),
            }
        }
        tally.by_task = by_task;
        tally
    }

    /// The key for a request: its `x-request-id`, or a new local one.
    fn key_for(&self, request: &Request) -> RequestKey {
        let given = request
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 128);
        RequestKey(match given {
            Some(id) => Arc::from(id),
            None => {
                let n = self.inner.unnamed.fetch_add(1, Ordering::Relaxed) + 1;
                Arc::from(format!("local-{n}"))
            }
        })
    }
}

/// The middleware (`axum::middleware::from_fn_with_state`): gives the request its
/// [`RequestKey`] and records when its response body is finished. Install it inside
/// `AfterResponseLayer` (add it to the router first).
pub async fn track(State(timeline): State<Timeline>, mut request: Request, next: Next) -> Response {
    let key = timeline.key_for(&request);
    request.extensions_mut().insert(key.clone());
    let response = next.run(request).await;
    response.map(|inner| {
        Body::new(Tracked {
            inner,
            finish: Some(Finish {
                timeline,
                request: key.0,
            }),
        })
    })
}

struct Finish {
    timeline: Timeline,
    request: Arc<str>,
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.timeline.response_finished(&self.request);
    }
}

/// A response body that records its finish: at its end of stream, or when dropped.
struct Tracked {
    inner: Body,
    finish: Option<Finish>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none() {
            // Recorded here, before the layer outside this body sees the end and releases.
            self.finish.take();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
