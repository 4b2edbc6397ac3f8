pub fn embed_document(id: DocId, text: String) {
    const _: &[u8] = ::core::include_bytes!(
        "$CARGO_MANIFEST_DIR/tests/expand/policies/search.policy"
    );
    static QUEUE: ::policy::__private::QueueSlot = ::policy::__private::QueueSlot::new(
        "embeddings",
    );
    let Some(args) = QUEUE.enqueue("embed_document", (id, text)) else {
        return;
    };
    let (id, text) = args;
    let work = ::policy::__private::typed::<
        ::policy::__private::ScheduledResult<Result<(), EmbedError>>,
        _,
    >(async move {
        let operation = {
            use ::core::time::Duration;
            use ::policy::__private::Handle;
            const BY: &str = ::core::concat!(
                ::core::module_path!(), "::", "embed_document"
            );
            static OPERATION: Handle<::policy::deadline::OperationDeadline> = Handle::operation(
                    ::core::concat!(::core::module_path!(), "::", "embed_document"),
                    BY,
                )
                .deadline(Duration::from_secs(30));
            &*OPERATION
        };
        let deadline = ::policy::Deadline::for_named(operation)?;
        let ran = deadline
            .run_in_scope(
                ::policy::__private::typed::<
                    Result<(), EmbedError>,
                    _,
                >(async move { embedder().embed(id, text).await }),
            )
            .await;
        ::policy::CallError::from_run(ran)
    });
    let work = ::policy::__private::deferrable(
        ::policy::__private::scheduled(work, ::policy::__private::logged()),
    );
    let _ = ::policy::background(
        ::core::concat!(::core::module_path!(), "::", "embed_document"),
        work,
    );
}
///The worker's side of [`embed_document`] on queue `embeddings`: give `embed_document::task()` to the queue's worker.
pub mod embed_document {
    #[allow(unused_imports, reason = "the arguments' types, as the function names them")]
    use super::*;
    ///The numbers of queue `embeddings`: no `queue embeddings { ... }` stanza declares it, so each is the runtime's default.
    pub fn queue_settings() -> ::policy::queue::QueueSettings {
        ::policy::queue::QueueSettings::new("embeddings")
    }
    ///What a worker of queue `embeddings` runs for a task of `embed_document`: its arguments decoded, then the same sequence as a call on the in-process pool. It carries `queue_settings()`, for the worker to start from.
    pub fn task() -> ::policy::queue::Handler {
        ::policy::__private::queue_handler(
                "embed_document",
                |(id, text): (DocId, String)| {
                    let work = ::policy::__private::typed::<
                        ::policy::__private::ScheduledResult<Result<(), EmbedError>>,
                        _,
                    >(async move {
                        let operation = {
                            use ::core::time::Duration;
                            use ::policy::__private::Handle;
                            const BY: &str = ::core::concat!(
                                ::core::module_path!(), "::", "embed_document"
                            );
                            static OPERATION: Handle<
                                ::policy::deadline::OperationDeadline,
                            > = Handle::operation(
                                    ::core::concat!(
                                        ::core::module_path!(), "::", "embed_document"
                                    ),
                                    BY,
                                )
                                .deadline(Duration::from_secs(30));
                            &*OPERATION
                        };
                        let deadline = ::policy::Deadline::for_named(operation)?;
                        let ran = deadline
                            .run_in_scope(
                                ::policy::__private::typed::<
                                    Result<(), EmbedError>,
                                    _,
                                >(async move { embedder().embed(id, text).await }),
                            )
                            .await;
                        ::policy::CallError::from_run(ran)
                    });
                    let work = ::policy::__private::deferrable(
                        ::policy::__private::scheduled(
                            work,
                            ::policy::__private::logged(),
                        ),
                    );
                    work
                },
            )
            .with_settings(queue_settings())
    }
}
