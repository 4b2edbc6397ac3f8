async fn save_document(doc: Doc) -> Result<DocId, AppError> {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let carrier = ::policy::__private::carrier::<Result<DocId, AppError>>();
    let deadline = ::policy::Deadline::leaf(
            "save_document",
            ::core::time::Duration::from_nanos(2000000000u64),
            ::core::time::Duration::from_nanos(200000000u64),
        )
        .map_err(carrier.refused)?;
    match deadline
        .run(
            deadline
                .scope(
                    ::policy::__private::typed::<
                        Result<DocId, AppError>,
                        _,
                    >(async move { db().insert(doc).await }),
                ),
        )
        .await
    {
        ::core::result::Result::Ok(result) => result,
        ::core::result::Result::Err(expired) => {
            ::core::result::Result::Err((carrier.expired)(expired))
        }
    }
}
