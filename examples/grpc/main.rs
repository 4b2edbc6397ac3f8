//! Two tonic services on loopback, A calling B, with the request's deadline end to end
//! (feature `tonic`): `cargo run --example grpc --features tonic`.
//!
//! - Both servers stamp each request's deadline with `DeadlineLayer`: the smaller of their own
//!   budget and the caller's `grpc-timeout`. B starts nothing with less than 200 ms.
//! - A calls B through `PropagateDeadlineLayer` on its channel: B is told what A has left,
//!   minus 100 ms A keeps for itself.
//! - B's method is under `#[velocity_policy::resilient]` and returns `Result<Response<_>, Status>`: a
//!   refusal reaches the caller as gRPC's status for it, with `grpc-retry-pushback-ms`.
//!
//! The services are written by hand in `wire.rs` (what `tonic-build` generates), so the build
//! needs no `protoc`; `tests/grpc.rs` runs the same wire with assertions.

mod wire;

use std::sync::Arc;
use std::time::Duration;

use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};
use velocity_policy::Registry;
use velocity_policy::layer::{DeadlineLayer, PropagateDeadline, PropagateDeadlineLayer};
use wire::{Answer, Ask, Handler, Reply};

/// The dependency.
struct B;

impl B {
    /// What B has left of the deadline its caller sent, behind a breaker.
    #[velocity_policy::resilient(
        breaker(failures = 5, within = "30s", cooldown = "10s"),
        deadline = "1s"
    )]
    async fn budget(&self, request: Request<Ask>) -> Result<Response<Answer>, Status> {
        Ok(Response::new(Answer {
            remaining_ms: wire::remaining_ms(),
            told_ms: wire::told_ms(&request),
            ..Answer::default()
        }))
    }
}

impl Handler for B {
    const NAME: &'static str = "policy.example.B";

    fn call(self: Arc<Self>, method: &str, request: Request<Ask>) -> Reply {
        let method = method.to_owned();
        Box::pin(async move {
            match method.as_str() {
                "Budget" => self.budget(request).await,
                other => Err(Status::unimplemented(format!("B has no method {other}"))),
            }
        })
    }
}

/// The caller: relays to B through a channel that carries its deadline.
struct A {
    b: tonic::client::Grpc<PropagateDeadline<Channel>>,
}

impl Handler for A {
    const NAME: &'static str = "policy.example.A";

    fn call(self: Arc<Self>, _method: &str, request: Request<Ask>) -> Reply {
        Box::pin(async move {
            let remaining_ms = wire::remaining_ms();
            let mut b = self.b.clone();
            let answer = wire::call::<B, _>(&mut b, "Budget", Request::new(Ask {}))
                .await?
                .into_inner();
            Ok(Response::new(Answer {
                remaining_ms,
                told_ms: wire::told_ms(&request),
                downstream_remaining_ms: answer.remaining_ms,
                downstream_told_ms: answer.told_ms,
            }))
        })
    }
}

/// Serves `handler` behind `deadline` on a loopback port; its address.
async fn serve<H: Handler>(
    handler: H,
    deadline: DeadlineLayer,
) -> Result<std::net::SocketAddr, Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = Server::builder()
        .layer(deadline)
        .add_service(wire::Server::new(Arc::new(handler)))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener));
    tokio::spawn(server);
    Ok(addr)
}

fn channel(addr: std::net::SocketAddr) -> Result<Channel, Box<dyn std::error::Error>> {
    Ok(Endpoint::from_shared(format!("http://{addr}"))?.connect_lazy())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let b = serve(
        B,
        DeadlineLayer::new(Duration::from_secs(5)).min_budget(Duration::from_millis(200)),
    )
    .await?;
    let to_b = tower::ServiceBuilder::new()
        .layer(PropagateDeadlineLayer::new().reserve(Duration::from_millis(100)))
        .service(channel(b)?);
    let a = serve(
        A {
            b: tonic::client::Grpc::new(to_b),
        },
        DeadlineLayer::new(Duration::from_secs(5)),
    )
    .await?;
    let mut to_a = tonic::client::Grpc::new(channel(a)?);
    let asking = |timeout| {
        let mut request = Request::new(Ask {});
        request.set_timeout(timeout);
        request
    };

    let answer = wire::call::<A, _>(&mut to_a, "Relay", asking(Duration::from_secs(2)))
        .await?
        .into_inner();
    println!(
        "A had {} ms left and told B {} ms; B had {} ms",
        answer.remaining_ms, answer.downstream_told_ms, answer.downstream_remaining_ms
    );

    // 250 ms for A leaves B at most 150: under its minimum, B answers without running.
    let Err(status) =
        wire::call::<A, _>(&mut to_a, "Relay", asking(Duration::from_millis(250))).await
    else {
        return Err("B ran with 150 ms, under its minimum".into());
    };
    println!("with 250 ms: {:?} ({})", status.code(), status.message());

    // B's breaker open (told to back off for 2 s): UNAVAILABLE with the pushback.
    let snapshot = Registry::global().snapshot();
    let name = snapshot
        .breakers
        .iter()
        .map(|b| &b.name)
        .find(|name| name.ends_with("::budget"))
        .ok_or("the first call built B's breaker")?;
    let breaker = Registry::global()
        .find_breaker(name)
        .ok_or("a breaker in the snapshot")?;
    breaker.trip(Duration::from_secs(2), "told to back off");
    let Err(status) = wire::call::<A, _>(&mut to_a, "Relay", asking(Duration::from_secs(2))).await
    else {
        return Err("B ran with its breaker open".into());
    };
    println!(
        "breaker open: {:?}, grpc-retry-pushback-ms: {:?}",
        status.code(),
        status.metadata().get("grpc-retry-pushback-ms")
    );
    Ok(())
}
