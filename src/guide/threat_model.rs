//! Threat model: what a request, or whoever can write to the fleet's Redis, cannot make the engine do.
//!
//! # Threat model
//!
//! Whoever sends a request, or can write to the Redis the fleet shares, must not be able to turn
//! the protection against the service: disable a dependency for longer than the local
//! configuration allows, exhaust an instance's memory, run code, widen privileges, or read what the
//! service keeps to itself. A caller may shorten its own wait, never make the service refuse
//! others. What comes from outside is bounded by the local configuration, size-checked before it is
//! read, and dropped and counted when malformed. Each row is a test that fails without its defence
//! (`velocity-policy-runtime/tests/` unless another path is given).
//!
//! **From a request**
//!
//! | attempt | what stops it | test |
//! |---|---|---|
//! | send `x-deadline-ms: 110` three times so the session lookup expires and its breaker opens for everyone | an expiry under a budget the caller shortened is the caller's: counted apart (`caller_expiries`), never a breaker failure, never shared, never retried, never a hedge sample | `examples/demo/tests/caller_deadline.rs`, `caller_deadline.rs`, `layer_caller_deadline.rs::short_caller_deadlines_through_the_layers_never_open_the_breaker`, `tests/caller_deadline.rs` |
//! | choose our budget at a public edge | `DeadlineLayer::trust_headers`: all callers (default), none, or only callers marked internal by a header or a predicate | `layer_caller_deadline.rs::a_public_edge_ignores_deadline_headers_and_an_internal_one_believes_only_marked_callers`, `…::a_predicate_on_the_connection_decides_who_is_internal` |
//! | read our internal budgets at a third party | `PropagateDeadlineLayer::only_to_hosts` | `layer_caller_deadline.rs::outgoing_budgets_reach_only_the_allowed_hosts` |
//! | send `x-criticality: critical_plus` from a public client to take slots kept for the most important work | the header is believed only from trusted callers (`CriticalityLayer::trust_headers`), and never above the route's ceiling | `layer_criticality.rs::a_route_sets_the_level_and_a_caller_may_lower_it_but_never_raise_it_past_the_ceiling`, `layer_criticality.rs::an_untrusted_callers_header_is_ignored` |
//! | read file paths and policy text from `/policy` | left out unless `Dashboard::reveal_sources`; the docs show mounting it behind authentication | `dashboard.rs::the_json_leaves_out_file_paths_and_policy_text_unless_asked` |
//!
//! **From whoever can write to the Redis**
//!
//! | attempt | what stops it | test |
//! |---|---|---|
//! | `XADD` a task that runs `refund_order("victim", 9999)` | with a secret, entries are signed (HMAC over queue, id, operation, arguments and enqueue time) and an unsigned or forged one is dead-lettered unrun and counted | `queue.rs::with_a_secret_an_unsigned_or_forged_entry_is_dead_lettered_and_never_run` |
//! | flood the queue with forged entries to flood the logs | each counted; a WARN at most once a second, the rest DEBUG | `queue.rs::a_flood_of_forged_entries_is_counted_in_full_and_warned_about_once_a_second` |
//! | a 100 MB queue entry, or thousands of consumers with 1 MB names | sizes checked in the script before anything is sent; the entry is dead-lettered as `too_large`, the list cut to 64 names of 128 bytes | `queue.rs::a_hundred_megabyte_entry_is_refused_inside_redis_and_never_reaches_the_instance`, `queue.rs::the_consumer_list_is_cut_inside_redis_before_it_is_read` |
//! | make the dead-letter stream another type so a task vanishes | one script, the dead letter written first; the task stays pending, the failure logged and counted | `queue.rs::a_dead_letter_redis_refuses_leaves_the_task_pending_logged_and_counted` |
//! | a late acknowledgement deletes a task another worker now runs | ownership checked in the script; the task deadline at most 4/5 of the visibility timeout (refused in `.policy`, lowered and warned at run time) | `queue.rs::a_delivery_that_ends_after_another_worker_claimed_its_task_leaves_it_to_that_worker`, `queue.rs::the_task_deadline_is_kept_within_four_fifths_of_the_visibility_timeout` |
//! | an operation name with a newline forges a log line | messages are constant; operation and error are fields | `queue.rs::an_operation_name_from_the_stream_is_a_field_and_cannot_forge_a_log_line` |
//! | a failover or eviction loses acknowledged tasks | `wait_for_replicas` (Redis `WAIT`); a warning unless `maxmemory-policy` is `noeviction`; the durability section of `velocity_policy::queue` | `queue.rs::an_enqueue_can_wait_for_a_replica_without_holding_up_the_rest`, `queue.rs::a_server_that_may_evict_keys_is_warned_about_once` |
//! | an override set with `deadline = 1ms`, `cooldown = 1000h`, `max_retry_after = 8760h` | every override stays within its envelope (¼ to 4× the compiled value; `cooldown` and `max_retry_after` never above it; widened only by the compiled `envelope` stanza) | `overrides_fleet.rs::the_fleets_set_moves_numbers_only_within_their_envelope_and_never_arms_a_drill`, `velocity-policy-lang/tests/overrides.rs::an_override_moves_a_number_only_within_its_envelope` |
//! | replay an older signed set with a higher version | version and publication time are signed; an older or stale set is refused | `overrides_fleet.rs::an_older_signed_set_cannot_be_replayed_as_a_newer_one` |
//! | arm a drill from the fleet | a fleet set may not name `chaos`; drills inject only after `chaos::arm()` in the process | `chaos_armed.rs::a_drill_injects_nothing_until_the_process_arms_drills`, `velocity-policy-lang/tests/overrides.rs::the_fleets_set_may_not_touch_a_drill` |
//! | an injected 429 opens the fleet's breaker | injected openings and failures are never shared | `redis.rs::an_injected_opening_is_never_shared_with_the_fleet` |
//! | forged failure records make a quorum, or a forged probation makes one failure open the fleet | signed reports counted by the reporting instance; probation bounded by the local window | `redis.rs::forged_failure_records_do_not_make_a_quorum`, `redis.rs::a_forged_probation_cannot_make_one_failure_open_the_fleet` |
//! | one `SET` of a far-future value holds the fleet limiter shut | a state beyond now plus the period is reset and counted; no wait is longer than the period | `redis.rs::a_far_future_state_cannot_hold_the_fleet_limiter_shut` |
//! | a 100 MB name, stored message or override set grows every instance | `LIMIT`, `STRLEN` and `HSTRLEN` in the scripts, before the wire | `redis.rs::a_100_mb_value_in_the_breaker_state_never_crosses_the_wire`, `overrides_fleet.rs::a_100_mb_override_set_never_crosses_the_wire` |
//! | an empty or short secret counts as signed; unsigned mode goes unnoticed | secrets under 32 bytes are refused at connect; `store_connected` says the mode, `store_unsigned` warns | `redis.rs::a_short_or_empty_shared_secret_is_refused_with_the_fix`, `redis.rs::the_store_says_at_connect_whether_it_signs_and_warns_once_when_it_does_not` |
//! | 10,000 unknown stanzas flood the logs | ten errors and one count | `overrides.rs::a_flood_of_unknown_stanzas_is_a_few_events_and_one_count` |
//! | `Duration::MAX` as a drain or re-sync period panics | saturating sleeps and a one-day cap | `duration_max.rs` (three tests), `defer.rs::a_drain_deadline_of_duration_max_waits_for_the_work_and_returns` |
//!
//! Without a shared secret, whoever can write to the Redis can still open a breaker for one local
//! bound per message, forge the failure quorum and run any queue handler with any arguments: the
//! store says so at connect (`store_unsigned`, WARN). Give the fleet a secret of at least 32 bytes.
