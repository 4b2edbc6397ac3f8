fn layer() {
    let layer = {
        const _: &[u8] = ::core::include_bytes!(
            "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
        );
        let (breaker, bulkhead, retry, operation) = {
            use ::core::time::Duration;
            use ::policy::__private::Handle;
            use ::policy::__private::config;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "reindex_all"
            );
            static BREAKER: Handle<::policy::Breaker> = Handle::breaker(
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
            static BULKHEAD: Handle<::policy::Bulkhead> = Handle::bulkhead(
                "search",
                BY,
                config::BulkheadConfig::new(4).with_max_queued(2),
            );
            static RETRY: Handle<::policy::RetryPolicy> = Handle::retry("transient", BY)
                .attempts(3)
                .backoff(Duration::from_millis(50), Duration::from_secs(1))
                .attempt_timeout(Duration::from_millis(500));
            static OPERATION: Handle<::policy::deadline::OperationDeadline> = Handle::operation(
                    ::core::concat!(::core::module_path!(), "::", "reindex_all"),
                    BY,
                )
                .deadline(Duration::from_secs(1))
                .min_budget(Duration::from_millis(50));
            (&*BREAKER, &*BULKHEAD, &*RETRY, &*OPERATION)
        };
        ::policy::layer::OperationLayer::new(
                "reindex_all",
                ::core::time::Duration::from_secs(1),
            )
            .span(|_| {
                ::policy::__private::tracing::info_span!(
                    target : "policy", "reindex_all", operation = "reindex_all", class =
                    "critical", "otel.status_code" =
                    ::policy::__private::tracing::field::Empty, "error.type" =
                    ::policy::__private::tracing::field::Empty,
                )
            })
            .calls({
                static CALLS: ::policy::__private::Calls = ::policy::__private::Calls::new(
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
