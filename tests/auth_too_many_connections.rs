//! Past `--max-connections`, a new connection gets a clear "too many connections" refusal
//! (gRPC: ResourceExhausted; HTTP: 503) instead of hanging; closing a connection frees its
//! slot.

mod common;

use common::{http_request, spawn};
use tidal_common::StatusCode;

#[test]
fn connections_over_the_limit_are_refused_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Limit 4: the mnode's SQL frontend holds one connection to its own gRPC port (opened by
    // the first statement), the three clients of the test the others.
    let mnode = spawn(
        "mnode",
        &[
            "mnode".into(),
            "--data".into(),
            dir.path().join("mnode").to_string_lossy().into_owned(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--http".into(),
            "127.0.0.1:0".into(),
            "--max-connections".into(),
            "4".into(),
        ],
    );
    let http = mnode.http.clone().expect("http");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // Each client has its own channel, so its own connection.
        let mut clients = Vec::new();
        for i in 0..3 {
            let c = tidal_client::Client::connect(&mnode.addr)
                .await
                .unwrap_or_else(|e| panic!("client {i} within the limit: {e}"));
            c.execute("SHOW DATABASES", "")
                .await
                .expect("within the limit");
            clients.push(c);
        }
        let started = std::time::Instant::now();
        let e = match tidal_client::Client::connect(&mnode.addr).await {
            Ok(_) => panic!("a 4th connection was served"),
            Err(e) => e,
        };
        assert_eq!(e.code, StatusCode::ResourceExhausted, "{e}");
        assert!(
            e.message
                .contains("ResourceExhausted: too many connections to this server (limit 4)"),
            "{e}"
        );
        assert!(
            started.elapsed().as_secs() < 10,
            "the refusal must not hang"
        );

        // A slot frees when a client goes away.
        drop(clients.pop());
        let mut ok = false;
        for _ in 0..50 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if let Ok(c) = tidal_client::Client::connect(&mnode.addr).await {
                c.execute("SHOW DATABASES", "").await.expect("served");
                ok = true;
                break;
            }
        }
        assert!(ok, "the freed slot was not reused");
    });

    // HTTP has its own limit of 4: hold four idle connections open, the fifth gets 503.
    let held: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(&http).expect("connect"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (st, body) = http_request(&http, "GET", "/health", &[], b"");
    assert_eq!(st, 503, "{body}");
    assert!(body.contains("too many connections"), "{body}");
    drop(held);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (st, _) = http_request(&http, "GET", "/health", &[], b"");
    assert_eq!(st, 200);
}
