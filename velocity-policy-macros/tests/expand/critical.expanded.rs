async fn save_document(doc: Doc) -> Result<DocId, AppError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::velocity_policy::__privateN::carrier::<Result<DocId, AppError>>();
    let operation = {
        use ::core::time::Duration;
        use ::velocity_policy::__privateN::Handle;
        use ::velocity_policy::__privateN::config;
        const BY: &str = ::core::concat!(::core::module_path!(), "::", "save_document");
        static OPERATION: Handle<
            ::velocity_policy::__privateN::deadline::OperationDeadline,
        > = Handle::operation(
            ::core::concat!(::core::module_path!(), "::", "save_document"),
            BY,
            config::DeadlineConfig::new(Duration::from_secs(2))
                .with_min_budget(Duration::from_millis(200)),
        );
        &*OPERATION
    };
    ::velocity_policy::__privateN::traced(
            {
                static CALLS: ::velocity_policy::__privateN::Calls = ::velocity_policy::__privateN::Calls::new(
                    "save_document",
                );
                &CALLS
            },
            ::velocity_policy::__privateN::tracing::info_span!(
                target : "policy", "save_document", operation = "save_document", class =
                "critical", "otel.status_code" =
                ::velocity_policy::__privateN::tracing::field::Empty, "error.type" =
                ::velocity_policy::__privateN::tracing::field::Empty,
            ),
            carrier
                .body(async move {
                    let deadline = ::velocity_policy::__privateN::Deadline::for_named(
                            operation,
                        )
                        .map_err(carrier.refused)?;
                    let ran = deadline
                        .run_in_scope(
                            carrier.body(async move { db().insert(doc).await }),
                        )
                        .await;
                    carrier.ran(ran)
                }),
        )
        .await
}
