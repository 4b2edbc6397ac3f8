async fn sign_up(email: Email) -> Result<UserId, AppError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::velocity_policy::__privateN::carrier::<Result<UserId, AppError>>();
    let (breaker, ratelimit, shedder, operation) = {
        use ::core::time::Duration;
        use ::velocity_policy::__privateN::Handle;
        use ::velocity_policy::__privateN::config;
        const BY: &str = ::core::concat!(::core::module_path!(), "::", "sign_up");
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
        static RATELIMIT: Handle<::velocity_policy::__privateN::RateLimit> = Handle::ratelimit(
            "signups",
            BY,
            config::RateLimitConfig::new(100, Duration::from_secs(60))
                .with_on_timeout(config::FailMode::Closed)
                .with_on_error(config::FailMode::Local)
                .with_local_rate(20, Duration::from_secs(60)),
        );
        static SHEDDER: Handle<::velocity_policy::__privateN::Shedder> = Handle::shedder(
            ::core::concat!(::core::module_path!(), "::", "sign_up"),
            BY,
            config::SheddingConfig::new(0.5, 0.25),
        );
        static OPERATION: Handle<
            ::velocity_policy::__privateN::deadline::OperationDeadline,
        > = Handle::operation(
            ::core::concat!(::core::module_path!(), "::", "sign_up"),
            BY,
            config::DeadlineConfig::new(Duration::from_secs(2)),
        );
        (&*BREAKER, &*RATELIMIT, &*SHEDDER, &*OPERATION)
    };
    ::velocity_policy::__privateN::traced(
            {
                static CALLS: ::velocity_policy::__privateN::Calls = ::velocity_policy::__privateN::Calls::new(
                    "sign_up",
                );
                &CALLS
            },
            ::velocity_policy::__privateN::tracing::info_span!(
                target : "policy", "sign_up", operation = "sign_up", class = "critical",
                "otel.status_code" =
                ::velocity_policy::__privateN::tracing::field::Empty, "error.type" =
                ::velocity_policy::__privateN::tracing::field::Empty,
            ),
            carrier
                .body(async move {
                    let deadline = ::velocity_policy::__privateN::Deadline::for_named(
                            operation,
                        )
                        .map_err(carrier.refused)?;
                    shedder
                        .admit(
                            ::velocity_policy::__privateN::WorkClass::Critical,
                            0.0,
                            &deadline,
                            ::core::time::Duration::from_millis(20),
                        )
                        .map_err(carrier.refused)?;
                    ratelimit.acquire().await.map_err(carrier.refused)?;
                    breaker.check().map_err(carrier.refused)?;
                    let ran = deadline
                        .run_in_scope(
                            carrier.body(async move { users().insert(email).await }),
                        )
                        .await;
                    carrier.outcome(breaker.observe(ran))
                }),
        )
        .await
}
