fn layer() {
    let layer = {
        const _: &[u8] = ::core::include_bytes!(
            "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
        );
        let (breaker, bulkhead, retry, operation) = {
            use ::core::time::Duration;
            use ::velocity_policy::__privateN::Handle;
            use ::velocity_policy::__privateN::config;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "reindex_all"
            );
            static BREAKER: Handle<::velocity_policy::__privateN::Breaker> = Handle::breaker(
                "search",
                BY,
                config::BreakerConfig::new(
                        config::OpenAfter::failures(5, Duration::from_secs(30)),
                        Duration::from_secs(20),
                    )
                    .with_sharing(config::Sharing::Openings {
                        quorum: 1,
                    }),
            );
            static BULKHEAD: Handle<::velocity_policy::__privateN::Bulkhead> = Handle::bulkhead(
                "search",
                BY,
                config::BulkheadConfig::new(4).with_max_queued(2),
            );
            static RETRY: Handle<::velocity_policy::__privateN::RetryPolicy> = Handle::retry(
                "transient",
                BY,
                config::RetryConfig::new(3)
                    .with_backoff(
                        config::Backoff::full_jitter(
                            Duration::from_millis(50),
                            Duration::from_secs(1),
                        ),
                    )
                    .with_attempt_timeout(Duration::from_millis(500)),
            );
            static OPERATION: Handle<
                ::velocity_policy::__privateN::deadline::OperationDeadline,
            > = Handle::operation(
                ::core::concat!(::core::module_path!(), "::", "reindex_all"),
                BY,
                config::DeadlineConfig::new(Duration::from_secs(1))
                    .with_min_budget(Duration::from_millis(50)),
            );
            (&*BREAKER, &*BULKHEAD, &*RETRY, &*OPERATION)
        };
        ::velocity_policy::__privateN::layer::OperationLayer::new(
                "reindex_all",
                ::core::time::Duration::from_secs(1),
            )
            .span(|_| {
                ::velocity_policy::__privateN::tracing::info_span!(
                    target : "policy", "reindex_all", operation = "reindex_all", class =
                    "critical", "otel.status_code" =
                    ::velocity_policy::__privateN::tracing::field::Empty, "error.type" =
                    ::velocity_policy::__privateN::tracing::field::Empty,
                )
            })
            .calls({
                static CALLS: ::velocity_policy::__privateN::Calls = ::velocity_policy::__privateN::Calls::new(
                    "reindex_all",
                );
                &CALLS
            })
            .min_budget(::core::time::Duration::from_millis(50))
            .deadline_of(::core::clone::Clone::clone(operation))
            .breaker(::core::clone::Clone::clone(breaker))
            .bulkhead(::core::clone::Clone::clone(bulkhead))
            .retry(::core::clone::Clone::clone(retry))
    };
}
