//! Did deferred work start after its response was finished? Counted as it happens, in constant
//! memory.
//!
//! Two kinds of events meet under one lock: a response body finishing (seen by a middleware
//! that wraps every response body, inside `velocity_policy::AfterResponseLayer`) and a deferred task's
//! body starting (recorded by its first line). A start is judged the moment it happens: its
//! request's response is either finished already (the task started **after** it), or still in
//! flight (it started **before**: the layer broke its promise), or unknown to the record
//! (**unmatched**). Order is read from the lock, never from clocks.
//!
//! The middleware's body sits *inside* the layer's body, so it sees the end first: when the
//! connection takes the last frame (`poll_frame` returns `None`) or drops the body (hyper does
//! that for bodies of known length once it has their bytes), this body records the finish
//! before the layer releases the request's deferred work.
//!
//! # Bounded
//!
//! Nothing here grows with the number of requests served, so `serve` can run for a month:
//!
//! | what | bound |
//! |---|---|
//! | requests in flight | one entry per request whose response is not finished (the server's concurrency), removed at the finish or when the request is dropped |
//! | recently finished responses | at most [`RECENT`] entries: two generations of `RECENT / 2`, the older dropped whole when the newer fills |
//! | counts | one [`Tally`] for the whole run, plus one per group the program declared with [`Timeline::count_group`] (at most [`MAX_GROUPS`]); each counts per task name, and task names are the program's own |
//!
//! Requests are remembered by a 64-bit keyed digest of their `x-request-id`, never by the id
//! itself: a client sending 128-byte ids costs the record nothing more than one sending none.
//! (Two ids sharing a digest are a 1 in 2⁴⁴ chance among the entries held at once.)
//!
//! A deferred task starting after more than `RECENT / 2` other responses finished since its own
//! may find its response forgotten and count as unmatched, never as after: the record only says
//! "after" when it saw the finish. The scenario serves far fewer requests than that in all, so its
//! counts are exact; the soak ([`crate::soak`]) reports the unmatched alongside.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use serde::Serialize;

/// The header a request's id is read from (the same one `AfterResponseLayer` reads).
pub const REQUEST_ID: &str = "x-request-id";

/// The longest `x-request-id` taken as the request's id (the layer's limit too); a longer one
/// is replaced by a local id.
pub const MAX_REQUEST_ID: usize = 128;

/// How many finished responses the record remembers at most, to match deferred starts with.
pub const RECENT: usize = 1 << 17;

/// How many groups a program may declare with [`Timeline::count_group`].
pub const MAX_GROUPS: usize = 64;

/// One request's id, in the request's extensions for handlers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestKey(pub Arc<str>);

/// Deferred starts, compared with their responses' ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Tasks that started after their response was finished.
    pub after: u64,
    /// Tasks that started before their response was finished (never, if the layer keeps its
    /// promise).
    pub before: u64,
    /// Tasks whose request has no recorded finish and is not in flight (should be 0 too).
    pub unmatched: u64,
    /// Responses finished, of the requests counted.
    pub responses: u64,
    /// Of those, responses `201 Created`: documents saved, each of which deferred its work.
    pub created: u64,
    /// Starts per task name.
    pub by_task: Vec<(&'static str, u64)>,
    /// Deferred tasks that met at least one fault a chaos drill injected (a drill, not the
    /// dependency), per task name: counted from the runtime's `injected` events each task's own
    /// work emitted ([`noting_injected`]).
    pub met_injected: Vec<(&'static str, u64)>,
    /// The injected faults those tasks met, in all.
    pub injected_faults: u64,
}

impl Tally {
    /// Every deferred start counted.
    pub fn started(&self) -> u64 {
        self.after + self.before + self.unmatched
    }

    /// The starts of the task named `task`.
    pub fn starts_of(&self, task: &str) -> u64 {
        self.by_task
            .iter()
            .find(|(name, _)| *name == task)
            .map_or(0, |(_, n)| *n)
    }

    /// Deferred tasks that met at least one injected fault, of every name.
    pub fn met_injected(&self) -> u64 {
        self.met_injected.iter().map(|(_, n)| n).sum()
    }

    fn injected(&mut self, task: &'static str, faults: u64) {
        self.injected_faults += faults;
        match self.met_injected.iter_mut().find(|(name, _)| *name == task) {
            Some((_, n)) => *n += 1,
            None => self.met_injected.push((task, 1)),
        }
    }

    fn start(&mut self, verdict: Verdict, task: &'static str) {
        match verdict {
            Verdict::After => self.after += 1,
            Verdict::Before => self.before += 1,
            Verdict::Unmatched => self.unmatched += 1,
        }
        match self.by_task.iter_mut().find(|(name, _)| *name == task) {
            Some((_, n)) => *n += 1,
            None => self.by_task.push((task, 1)),
        }
    }

    fn finish(&mut self, created: bool) {
        self.responses += 1;
        self.created += u64::from(created);
    }
}

/// A group was declared beyond [`MAX_GROUPS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot count the group `{0}`: the timeline counts at most {MAX_GROUPS} groups; declare fewer (one per phase, not one per request)"
)]
pub struct TooManyGroups(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    After,
    Before,
    Unmatched,
}

#[derive(Debug, Default)]
struct Record {
    /// Requests whose response is not finished, by digest: how many (a client may repeat an id).
    in_flight: HashMap<u64, u32>,
    /// Recently finished responses, by digest: the newer generation...
    finished: HashSet<u64>,
    /// ...and the older one, dropped whole when the newer reaches `RECENT / 2`.
    finished_before: HashSet<u64>,
    total: Tally,
    /// Groups declared by the program: an id prefix and its counts.
    groups: Vec<(Box<str>, Tally)>,
}

impl Record {
    fn groups_of<'a>(&'a mut self, request: &'a str) -> impl Iterator<Item = &'a mut Tally> + 'a {
        self.groups
            .iter_mut()
            .filter(move |(prefix, _)| request.starts_with(&**prefix))
            .map(|(_, tally)| tally)
    }
}

#[derive(Debug, Default)]
struct Inner {
    digests: RandomState,
    unnamed: AtomicU64,
    state: Mutex<Record>,
}

/// The shared record. Cloning is cheap.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    inner: Arc<Inner>,
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

    fn digest(&self, request: &str) -> u64 {
        self.inner.digests.hash_one(request)
    }

    /// Counts the requests whose id starts with `prefix` apart, from now on (the scenario
    /// declares one group per phase). Declaring a group twice counts it once.
    pub fn count_group(&self, prefix: &str) -> Result<(), TooManyGroups> {
        let mut state = lock(&self.inner.state);
        if state.groups.iter().any(|(p, _)| &**p == prefix) {
            return Ok(());
        }
        if state.groups.len() >= MAX_GROUPS {
            return Err(TooManyGroups(prefix.to_owned()));
        }
        state.groups.push((prefix.into(), Tally::default()));
        Ok(())
    }

    /// Records that `request`'s response is being produced: until it is finished, a deferred
    /// start of this request counts as before.
    pub fn request_started(&self, request: &str) {
        let digest = self.digest(request);
        *lock(&self.inner.state).in_flight.entry(digest).or_default() += 1;
    }

    /// Records that `request`'s response body is finished (`created`: it was a `201 Created`).
    pub fn response_finished(&self, request: &str, created: bool) {
        let digest = self.digest(request);
        let mut state = lock(&self.inner.state);
        if let Some(n) = state.in_flight.get_mut(&digest) {
            *n -= 1;
            if *n == 0 {
                state.in_flight.remove(&digest);
            }
        }
        if state.finished.len() >= RECENT / 2 {
            // The older generation goes whole; both sets keep their capacity.
            let state = &mut *state;
            std::mem::swap(&mut state.finished, &mut state.finished_before);
            state.finished.clear();
        }
        state.finished.insert(digest);
        state.total.finish(created);
        for group in state.groups_of(request) {
            group.finish(created);
        }
    }

    /// Records that the deferred task `task`, deferred by `request`, starts now.
    pub fn deferred_started(&self, request: &str, task: &'static str) {
        let digest = self.digest(request);
        let mut state = lock(&self.inner.state);
        let verdict = if state.finished.contains(&digest) || state.finished_before.contains(&digest)
        {
            Verdict::After
        } else if state.in_flight.contains_key(&digest) {
            Verdict::Before
        } else {
            Verdict::Unmatched
        };
        state.total.start(verdict, task);
        for group in state.groups_of(request) {
            group.start(verdict, task);
        }
    }

    /// Records that the deferred task `task`, deferred by `request`, met `faults` faults a chaos
    /// drill injected (as [`noting_injected`] counted them); nothing when `faults` is 0.
    pub fn met_injected(&self, request: &str, task: &'static str, faults: u64) {
        if faults == 0 {
            return;
        }
        let mut state = lock(&self.inner.state);
        state.total.injected(task, faults);
        for group in state.groups_of(request) {
            group.injected(task, faults);
        }
    }

    /// The counts of the group `prefix` (empty if it was never declared).
    pub fn tally(&self, prefix: &str) -> Tally {
        lock(&self.inner.state)
            .groups
            .iter()
            .find(|(p, _)| &**p == prefix)
            .map(|(_, tally)| tally.clone())
            .unwrap_or_default()
    }

    /// The counts of every request since the record began.
    pub fn total(&self) -> Tally {
        lock(&self.inner.state).total.clone()
    }

    /// How many entries the record holds now: requests in flight and finished responses
    /// remembered (at most their concurrency plus [`RECENT`]).
    pub fn held(&self) -> (usize, usize) {
        let state = lock(&self.inner.state);
        (
            state.in_flight.len(),
            state.finished.len() + state.finished_before.len(),
        )
    }

    /// The key for a request: its `x-request-id`, or a new local one.
    fn key_for(&self, request: &Request) -> RequestKey {
        let given = request
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= MAX_REQUEST_ID);
        RequestKey(match given {
            Some(id) => Arc::from(id),
            None => {
                let n = self.inner.unnamed.fetch_add(1, Ordering::Relaxed) + 1;
                Arc::from(format!("local-{n}"))
            }
        })
    }
}

tokio::task_local! {
    /// The injected faults the work inside [`noting_injected`] met so far.
    static INJECTED_SEEN: Cell<u64>;
}

/// Runs `work` and counts the faults a chaos drill injected into it: every `injected` event
/// the runtime emits while `work` is polled (the event log calls [`injected_seen`] for each, on
/// the thread and in the task that drew the fault). Work spawned onto other tasks is not counted.
pub async fn noting_injected<F: Future>(work: F) -> (F::Output, u64) {
    INJECTED_SEEN
        .scope(Cell::new(0), async {
            let output = work.await;
            (output, INJECTED_SEEN.with(Cell::get))
        })
        .await
}

/// Counts one injected fault for the [`noting_injected`] around the current task, if any.
pub fn injected_seen() {
    let _ = INJECTED_SEEN.try_with(|seen| seen.set(seen.get() + 1));
}

/// The middleware (`axum::middleware::from_fn_with_state`): gives the request its
/// [`RequestKey`] and records when its response body is finished. Install it inside
/// `AfterResponseLayer` (add it to the router first).
pub async fn track(State(timeline): State<Timeline>, mut request: Request, next: Next) -> Response {
    let key = timeline.key_for(&request);
    request.extensions_mut().insert(key.clone());
    timeline.request_started(&key.0);
    // Made before the handler runs: if the handler's future is dropped before a response
    // exists (the client went away), the request still leaves the in-flight record, as the
    // layer outside releases its deferred work then too.
    let mut finish = Finish {
        timeline,
        request: key.0,
        created: false,
    };
    let response = next.run(request).await;
    finish.created = response.status() == StatusCode::CREATED;
    response.map(|inner| {
        Body::new(Tracked {
            inner,
            finish: Some(finish),
        })
    })
}

struct Finish {
    timeline: Timeline,
    request: Arc<str>,
    created: bool,
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.timeline.response_finished(&self.request, self.created);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_after_only_once_its_response_finished() {
        let timeline = Timeline::new();
        timeline.count_group("a0-").unwrap();
        timeline.request_started("a0-1");
        timeline.deferred_started("a0-1", "early");
        timeline.response_finished("a0-1", true);
        timeline.deferred_started("a0-1", "late");
        timeline.deferred_started("a0-unknown", "late");
        let tally = timeline.tally("a0-");
        assert_eq!(
            (tally.before, tally.after, tally.unmatched),
            (1, 1, 1),
            "{tally:?}"
        );
        assert_eq!((tally.responses, tally.created), (1, 1));
        assert_eq!(tally.starts_of("late"), 2);
        assert_eq!(timeline.total(), tally, "every request is in the total");
        assert_eq!(timeline.tally("b0-"), Tally::default(), "never declared");
    }

    #[test]
    fn groups_count_only_their_prefix_and_are_bounded() {
        let timeline = Timeline::new();
        timeline.count_group("a1-").unwrap();
        timeline.request_started("a2-1");
        timeline.response_finished("a2-1", false);
        timeline.deferred_started("a2-1", "x");
        assert_eq!(timeline.tally("a1-"), Tally::default());
        assert_eq!(timeline.total().after, 1);
        for n in 1..MAX_GROUPS {
            assert_eq!(timeline.count_group(&format!("g{n}-")), Ok(()));
        }
        assert_eq!(timeline.count_group("a1-"), Ok(()), "already counted");
        let refused = timeline.count_group("one-too-many-");
        assert_eq!(refused, Err(TooManyGroups("one-too-many-".into())));
    }

    #[test]
    fn the_record_holds_a_bounded_number_of_requests_however_many_are_served() {
        let timeline = Timeline::new();
        let long = "x".repeat(MAX_REQUEST_ID - 12);
        for n in 0..(RECENT as u64 * 3) {
            let id = format!("{long}-{n}");
            timeline.request_started(&id);
            timeline.response_finished(&id, false);
            timeline.deferred_started(&id, "count");
        }
        let (in_flight, finished) = timeline.held();
        assert_eq!(in_flight, 0);
        assert!(finished <= RECENT, "{finished}");
        let total = timeline.total();
        assert_eq!(total.after, RECENT as u64 * 3);
        assert_eq!((total.before, total.unmatched), (0, 0));
    }

    #[test]
    fn a_start_long_after_its_response_is_unmatched_never_after() {
        let timeline = Timeline::new();
        timeline.request_started("first");
        timeline.response_finished("first", false);
        for n in 0..RECENT {
            let id = n.to_string();
            timeline.request_started(&id);
            timeline.response_finished(&id, false);
        }
        timeline.deferred_started("first", "late");
        let total = timeline.total();
        assert_eq!((total.after, total.unmatched), (0, 1), "{total:?}");
    }

    #[tokio::test]
    async fn injected_faults_are_counted_for_the_task_whose_work_met_them() {
        let timeline = Timeline::new();
        timeline.count_group("a3-").unwrap();
        let ((), seen) = noting_injected(async {
            injected_seen();
            tokio::task::yield_now().await;
            injected_seen();
        })
        .await;
        assert_eq!(seen, 2);
        injected_seen(); // outside any `noting_injected`: counted nowhere
        let ((), none) = noting_injected(async {}).await;
        assert_eq!(none, 0);
        timeline.met_injected("a3-1", "index", seen);
        timeline.met_injected("a3-2", "index", none);
        timeline.met_injected("a4-1", "index", 1);
        let tally = timeline.tally("a3-");
        assert_eq!(tally.met_injected, vec![("index", 1)], "{tally:?}");
        assert_eq!((tally.met_injected(), tally.injected_faults), (1, 2));
        let total = timeline.total();
        assert_eq!((total.met_injected(), total.injected_faults), (2, 3));
    }

    #[test]
    fn repeated_ids_in_flight_leave_the_record_one_by_one() {
        let timeline = Timeline::new();
        timeline.request_started("same");
        timeline.request_started("same");
        timeline.response_finished("same", false);
        assert_eq!(timeline.held().0, 1);
        timeline.response_finished("same", false);
        assert_eq!(timeline.held().0, 0);
    }
}
