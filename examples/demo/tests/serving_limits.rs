//! The service's edges toward its clients, with short configured limits: a client that stops
//! mid-headers is disconnected after the header read timeout, one that stops mid-body is
//! answered 408 after the body read deadline, and connections past the limit are closed at
//! once while the ones inside it are served.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    clippy::panic,
    reason = "test code: a failed unwrap or a connection left open is a failed test"
)]

use std::time::{Duration, Instant};

use policy_demo::service::token_for;
use policy_demo::stack::{self, Instance, Providers, ServeLimits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn service(limits: ServeLimits) -> (Providers, Instance) {
    let db = stack::prepare_database(None, 1).await.expect("the store");
    let providers = Providers::start().await.expect("the providers");
    let instance = Instance::start_within("a", &providers.urls(), db, 0, limits)
        .await
        .expect("the service");
    (providers, instance)
}

fn addr(instance: &Instance) -> String {
    instance.url().trim_start_matches("http://").to_owned()
}

/// Reads until the server closes the connection (or resets it); returns what it sent and when
/// it closed. Gives up after `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> (String, Instant) {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(within, stream.read(&mut buf)).await {
            Err(_) => panic!(
                "still open after {within:?}; received: {}",
                String::from_utf8_lossy(&received)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => {
                return (
                    String::from_utf8_lossy(&received).into_owned(),
                    Instant::now(),
                );
            }
            Ok(Ok(n)) => received.extend_from_slice(&buf[..n]),
        }
    }
}

/// True when nothing arrives and the connection stays open for `quiet`.
async fn stays_open(stream: &mut TcpStream, quiet: Duration) -> bool {
    let mut buf = [0u8; 64];
    tokio::time::timeout(quiet, stream.read(&mut buf))
        .await
        .is_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_mid_headers_or_mid_body_is_cut_off_after_the_configured_time() {
    let limits = ServeLimits {
        header_read_timeout: Duration::from_millis(400),
        body_read_timeout: Duration::from_millis(400),
        max_connections: 64,
    };
    let (providers, instance) = service(limits).await;

    // Half the headers, then nothing: closed after the header read timeout, without an answer
    // (there is no request to answer yet).
    let mut slow_headers = TcpStream::connect(addr(&instance)).await.unwrap();
    let started = Instant::now();
    slow_headers
        .write_all(b"POST /documents HTTP/1.1\r\nhost: demo\r\ncontent-type: applic")
        .await
        .unwrap();
    let (answer, closed) = until_closed(&mut slow_headers, Duration::from_secs(5)).await;
    let held = closed - started;
    assert!(
        held >= Duration::from_millis(350) && held < Duration::from_secs(3),
        "held for {held:?}"
    );
    assert_eq!(answer, "", "no response to a request that never arrived");

    // The whole headers, then ten of the hundred bytes of the body, then nothing: 408 after
    // the body read deadline, and the connection closed.
    let mut slow_body = TcpStream::connect(addr(&instance)).await.unwrap();
    let started = Instant::now();
    let head = format!(
        "POST /documents HTTP/1.1\r\nhost: demo\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"title\":",
        token_for(1)
    );
    slow_body.write_all(head.as_bytes()).await.unwrap();
    let (answer, closed) = until_closed(&mut slow_body, Duration::from_secs(5)).await;
    let held = closed - started;
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout"),
        "{answer}"
    );
    assert!(
        answer.contains("the request body did not arrive in time"),
        "{answer}"
    );
    assert!(
        held >= Duration::from_millis(350) && held < Duration::from_secs(3),
        "held for {held:?}"
    );

    // A client that sends its request in time is served as usual.
    let mut prompt = TcpStream::connect(addr(&instance)).await.unwrap();
    prompt
        .write_all(b"GET /policy HTTP/1.1\r\nhost: demo\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let (answer, _) = until_closed(&mut prompt, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

    instance.stop().await;
    providers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_closed_at_once_and_counted() {
    let limits = ServeLimits {
        header_read_timeout: Duration::from_secs(20),
        body_read_timeout: Duration::from_secs(20),
        max_connections: 3,
    };
    let (providers, instance) = service(limits).await;

    // Three clients hold the three connections, sending nothing.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(TcpStream::connect(addr(&instance)).await.unwrap());
    }
    // The fourth and fifth are closed at once, not queued behind them.
    for _ in 0..2 {
        let mut past = TcpStream::connect(addr(&instance)).await.unwrap();
        let (answer, _) = until_closed(&mut past, Duration::from_secs(2)).await;
        assert_eq!(answer, "");
    }
    assert_eq!(instance.refused_connections(), 2);
    for stream in &mut held {
        assert!(stays_open(stream, Duration::from_millis(200)).await);
    }

    // One of the three goes away: its slot is free, and the next connection is served.
    drop(held.pop());
    let mut next = None;
    for _ in 0..50 {
        let mut stream = TcpStream::connect(addr(&instance)).await.unwrap();
        stream
            .write_all(b"GET /policy HTTP/1.1\r\nhost: demo\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let (answer, _) = until_closed(&mut stream, Duration::from_secs(5)).await;
        if !answer.is_empty() {
            next = Some(answer);
            break;
        }
        // The server had not yet seen the close: this one was refused; try again.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = next.expect("a connection served once a slot was free");
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");

    drop(held);
    instance.stop().await;
    providers.stop().await;
}
