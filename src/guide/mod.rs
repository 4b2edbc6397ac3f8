#![doc = "Guides: one page per topic, each with examples that run as doctests.

The crate root and the README say what the engine is and how to add it to a service in five
minutes; these pages say the rest. They hold no items, only documentation: every example on
them is compiled and run by `cargo test --doc --all-features`, and an example that needs a
feature says which (it compiles to nothing without it).

# Start here

| guide | what it covers |
|---|---|
| [`attributes`] | what `#[critical]`, `#[deferred]`, `#[background]`, `#[resilient]` and `#[idempotent]` expand to, the unsafe combinations they refuse at compile time, and how a function binds to a `.policy` operation |
| [`policy_files`] | writing a `.policy` file, and `policy check`, `policy fmt`, `policy explain` |
| [`deadlines`] | one deadline per request, whose deadline it is, and the request's bound as `policy explain` draws it |
| [`layers`] | the same mechanisms as tower layers, `operation_layer!`, and how much a request matters (criticality) |
| [`deferred`] | work the user does not wait for: after the response, bounded, drained at shutdown |
| [`serving`] | stopping on SIGTERM in the right order, and what one client may hold |

# Mechanisms in depth

| guide | what it covers |
|---|---|
| [`sizing`] | the numbers to start from (what the proving ground measured), and adaptive bulkheads |
| [`rate_limits`] | rate limits, in one instance or across the fleet |
| [`hedging`] | hedging a slow tail out of the retries' budget |
| [`fallbacks`] | a fallback per operation, which only ever drops privileges; stale-if-error |
| [`drills`] | fault injection declared in the policy, through the real mechanisms |

# Operating it

| guide | what it covers |
|---|---|
| [`grpc`] | tonic services and channels, hyper-util and reqwest clients |
| [`observability`] | metrics, OpenTelemetry, the live dashboard |
| [`overrides`] | numbers per environment, reloaded live, checked by the same validator |
| [`fleet`] | Redis: breaker openings shared across instances, fleet rate limits, one set of overrides |
| [`queue`] | background work on a durable Redis stream |
| [`delivery`] | `policy locality`, `policy assets`, `policy gate` |
| [`testing`] | `velocity-policy-testkit`: a fake dependency, a registry per test, assertions on the paused clock |
| [`threat_model`] | what a request, or whoever can write to the fleet's Redis, cannot make the engine do |

# The crates

| crate | what it holds |
|---|---|
| `policy` | the facade users depend on: the attribute macros and the runtime's public types, and these guides |
| `velocity-policy-runtime` | the mechanisms alone: `deadline`, `breaker`, `bulkhead`, `shedding`, `retry`, `defer`, `background`, `isolate`, `fallback`, `limiter`, the registry and its snapshot; behind a feature, the Redis store |
| `velocity-policy-delivery` | what the build and the edge deliver: the locality probe and the image-dimensions layer, which the facade's feature `delivery` brings in; and, for the command only, the asset audit (`audit`), the gate (`gate`) and the locality hops (`hops`) |
| `velocity-policy-lang` | the `.policy` language: grammar, model, the one validator and its diagnostics |
| `velocity-policy-macros` | the attribute macros `#[critical]`, `#[deferred]`, `#[background]`, `#[resilient]`, `#[idempotent]`, `#[operation]`, `#[isolate]` |
| `velocity-policy-cli` | the `policy` command, a thin front over `velocity-policy-lang` and `velocity-policy-delivery`: `check`, `explain`, `fmt`, `gate`, `assets`, `locality` |
| `velocity-policy-testkit` | the test kit, for your dev-dependencies ([`testing`]) |

Design notes live in the crate docs of `velocity-policy-runtime`: every timeout is bounded, a child
deadline never outlives its parent, a retry spends the same budget as the attempt it replaces, a
closed breaker's check is one atomic load, and a bulkhead bounds one instance (the fleet-wide
bound is the platform's concurrency and the dependency's connection limit). The demo's own
material (its scenario, `serve`, the soak) is in `examples/demo/README.md`."]

pub mod attributes;
pub mod deadlines;
pub mod deferred;
pub mod delivery;
pub mod drills;
pub mod fallbacks;
pub mod fleet;
pub mod grpc;
pub mod hedging;
pub mod layers;
pub mod observability;
pub mod overrides;
pub mod policy_files;
pub mod queue;
pub mod rate_limits;
pub mod serving;
pub mod sizing;
pub mod testing;
pub mod threat_model;
