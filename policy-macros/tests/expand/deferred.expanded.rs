fn index_document(id: DocId) {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    let work = ::policy::__privateN::typed::<
        ::policy::__privateN::ScheduledResult<Result<(), SearchError>>,
        _,
    >(async move {
        let operation = {
            use ::policy::__privateN::Handle;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "index_document"
            );
            static OPERATION: Handle<
                ::policy::__privateN::deadline::OperationDeadline,
            > = Handle::operation(
                ::core::concat!(::core::module_path!(), "::", "index_document"),
                BY,
            );
            &*OPERATION
        };
        let deadline = ::policy::__privateN::Deadline::for_named(operation)?;
        let ran = deadline
            .run_in_scope(
                ::policy::__privateN::typed::<
                    Result<(), SearchError>,
                    _,
                >(async move { search().index(id).await }),
            )
            .await;
        ::policy::__privateN::CallError::from_run(ran)
    });
    let work = ::policy::__privateN::deferrable(
        ::policy::__privateN::scheduled(work, ::policy::__privateN::logged()),
    );
    ::policy::__privateN::defer(
        ::core::concat!(::core::module_path!(), "::", "index_document"),
        work,
    );
}
