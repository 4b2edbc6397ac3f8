//! Writing a `.policy` file: the stanzas, the commands that check and format them, and their reports.
//!
//! # Writing a `.policy` file
//!
//! A `.policy` file says, for each operation of a service, what class of work it is and which
//! mechanisms guard it. The attribute macros read the same files (every `*.policy` in a
//! directory), and both go through one validator, so a mistake is caught the same way in either.
//!
//! ```text
//! // Comments run to the end of the line.
//! request { deadline = 10s } // the budget every request starts with
//!
//! breaker payments { open_after = 5 failures within 30s; cooldown = 20s; shared }
//! bulkhead payments { max_concurrent = 4; max_queued = 8 }
//! bulkhead partners { adaptive(min = 4, max = 64) } // the slot count follows latency
//! retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 2s }
//! shedding { deferred at load 0.5; background at load 0.25 }
//! ratelimit signups { 100 per 1m; on_timeout = open; on_error = closed }
//! queue embeddings { max_len = 10000; visibility_timeout = 30s; max_deliveries = 5 }
//!
//! operation charge_card: critical, durable {
//!     breaker = payments
//!     bulkhead = payments
//!     deadline = 3s
//!     min_budget = 200ms
//! }
//! operation index_document: deferred, idempotent { retry = transient; deadline = 5s }
//! operation embed_document: background, idempotent { queue = embeddings; deadline = 20s }
//! ```
//!
//! Each stanza is `KEYWORD [NAME] [: class, flags] { ... }`, its `{` on the header's line;
//! statements are `key = value` or a phrase (`shared`, `100 per 1m`), separated by `;` or new
//! lines. Durations take `ms`, `s`, `m`, `h`; ratios are `0.25` or `25%`. An operation is
//! `critical`, `deferred` or `background`, and may be `idempotent` (safe to run twice) and
//! `durable` (a write that must be acknowledged). One word, one meaning: a *budget* is time,
//! what is left of a deadline (`min_budget`); a retry's `allowance = 20% + 10/s` is the share of
//! traffic its retries may add; a `ceilings` stanza holds the most a build may weigh. The crate
//! docs of `velocity-policy-lang` list every setting and every diagnostic code with its fix.
//!
//! ```sh
//! policy check policies/            # every problem of every file; exit 1 on errors; --format json for tools
//! policy check --against policies policies/production  # an environment's overrides merged into the compiled policy, checked whole
//! policy explain policies/ charge_card   # the chain, and the worst case with and without deadline propagation
//! policy fmt policies/ [--check]    # canonical layout, comments kept
//! ```
//!
//! A crate's folder stands for the files its attributes read (its `policies/`, or the `dir` of
//! `[package.metadata.policy]`), and a path that yields no `.policy` file is an error saying where
//! it looked (exit 2), never a clean run over nothing. Any file may be thrown at them. Only
//! regular files are read: a named pipe or a device (`/dev/zero`) is refused before it is opened
//! (exit 2, naming what the path is), and inside a directory such entries are left out. No more than the parser's limit (4 MiB) and a byte is
//! read, so a huge or growing file is one `policy::too-large` diagnostic. Reports draw the lines
//! around each error, long lines cut around it (an error a million columns in is drawn like any
//! other), at a cost that does not grow with the file; the first 50 are drawn, the rest counted
//! in one line, and `--format json` lists every one (a 1 MB file of errors takes about 0.3 s,
//! see BENCHMARKS.md).
//!
//! Retrying an operation that is not marked `idempotent` is an error, because a network timeout
//! is exactly when the first attempt may have succeeded unseen. With `checkout.policy`:
//!
//! ```text
//! request { deadline = 10s }
//!
//! retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 2s }
//!
//! operation charge_card: critical {
//!     retry = transient
//!     deadline = 3s
//! }
//! ```
//!
//! `policy check checkout.policy` reports the error, and a warning that the third attempt could
//! never start in time (exit code 1):
//!
//! ```text
//! policy::retry-not-idempotent
//!
//!   x operation `charge_card` is retried but not marked `idempotent`
//!    ,-[checkout.policy:6:13]
//!  4 |
//!  5 | operation charge_card: critical {
//!    :           ^^^^^|^^^^^
//!    :                `-- not marked `idempotent`
//!  6 |     retry = transient
//!    :             ^^^^|^^^^
//!    :                 `-- retried here
//!  7 |     deadline = 3s
//!    `----
//!   help: a network timeout is exactly when the first attempt may have succeeded
//!         unseen: mark `charge_card` `idempotent` if running it twice is safe,
//!         or remove `retry = transient`
//!
//! policy::unreachable-attempts
//!
//!   ! operation `charge_card` allows 3 attempts but only 2 can start within 3s
//!   | when attempts time out
//!    ,-[checkout.policy:6:13]
//!  2 |
//!  3 | retry transient { attempts = 3; backoff = full_jitter(base = 50ms, cap = 1s); attempt_timeout = 2s }
//!    :                              |                                                                  ^|
//!    :                              |                                                                   `-- each attempt may take this long
//!    :                              `-- attempts
//!  4 |
//!  5 | operation charge_card: critical {
//!  6 |     retry = transient
//!    :             ^^^^|^^^^
//!    :                 `-- 1 of 3 attempts cannot start in time
//!  7 |     deadline = 3s
//!    :                ^|
//!    :                 `-- the deadline
//!  8 | }
//!    `----
//!   help: attempt timeouts and backoff use up the deadline first: lower
//!         `attempts` to 2, shorten `attempt_timeout`, or raise the deadline
//!
//! policy check: 1 error, 1 warning in 1 file (1 operation)
//! ```
