async fn save_document(doc: Doc) -> Result<DocId, AppError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::policy::__private::carrier::<Result<DocId, AppError>>();
    ::policy::__private::traced(
            {
                static CALLS: ::policy::__private::Calls = ::policy::__private::Calls::new(
                    "save_document",
                );
                &CALLS
            },
            ::policy::__private::tracing::info_span!(
                target : "policy", "save_document", operation = "save_document", class =
                "critical"
            ),
            carrier
                .body(async move {
                    let deadline = ::policy::Deadline::for_operation(
                            "save_document",
                            ::core::time::Duration::from_secs(2),
                            ::core::time::Duration::from_millis(200),
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
