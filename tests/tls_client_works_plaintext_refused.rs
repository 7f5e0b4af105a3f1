//! With `--tls-cert/--tls-key` every node serves gRPC and HTTP over TLS (the nodes also talk
//! to each other over TLS): a client trusting the CA (`--tls-ca`) works end to end, a
//! plaintext client is refused on both.

mod common;

use common::{rows, spawn, ROOT_BASIC_AUTH};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;
use tidal_client::{Client, ConnectOptions};
use tokio_rustls::rustls;

/// One HTTP/1.1 request over TLS; returns the raw response.
async fn https(addr: &str, ca_pem: &[u8], req: &str) -> String {
    use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(c.expect("cert")).expect("add root");
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .expect("TLS handshake with the HTTP API");
    tls.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(30), tls.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn tls_client_works_and_plaintext_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("self-signed certificate");
    let cert_pem = ck.cert.pem();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, &cert_pem).expect("write cert");
    std::fs::write(&key, ck.signing_key.serialize_pem()).expect("write key");
    let p = |x: &std::path::Path| x.to_string_lossy().into_owned();
    let tls = vec![
        "--tls-cert".to_string(),
        p(&cert),
        "--tls-key".into(),
        p(&key),
    ];

    let mut margs = vec![
        "mnode".to_string(),
        "--data".into(),
        p(&dir.path().join("mnode")),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--http".into(),
        "127.0.0.1:0".into(),
    ];
    margs.extend(tls.clone());
    let mnode = spawn("mnode", &margs);
    let http = mnode.http.clone().expect("http");
    let mut dargs = vec![
        "vnode".to_string(),
        "--data".into(),
        p(&dir.path().join("dnode")),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--mnode".into(),
        mnode.addr.clone(),
    ];
    dargs.extend(tls);
    let _dnode = spawn("vnode", &dargs);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // TLS client: DDL through the mnode, writes straight to the data node, a query.
        let c = Client::connect_with(
            &mnode.addr,
            ConnectOptions::default().with_tls_ca(cert_pem.clone().into_bytes()),
        )
        .await
        .expect("TLS client connects");
        c.execute("CREATE DATABASE db1", "").await.expect("create db");
        c.execute("CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (g INT)", "db1")
            .await
            .expect("create stable");
        c.execute("INSERT INTO t1 USING st TAGS (1) VALUES (1000, 1) (2000, 2)", "db1")
            .await
            .expect("insert over TLS");
        let r = c.execute("SELECT COUNT(*) FROM st", "db1").await.expect("select");
        assert_eq!(r.batch.expect("rows").row(0)[0], tidal_common::Value::Int(2));

        // Plaintext gRPC to the TLS port: refused (no answer it can read, never data).
        let e = match Client::connect(&mnode.addr).await {
            Ok(_) => panic!("a plaintext client logged in to a TLS server"),
            Err(e) => e,
        };
        // (The wording depends on where the handshake bytes broke the HTTP/2 stream.)
        assert_eq!(e.code, tidal_common::StatusCode::Unavailable, "{e}");

        // HTTP over TLS.
        let resp = https(
            &http,
            cert_pem.as_bytes(),
            &format!(
                "POST /rest/sql/db1 HTTP/1.1\r\nHost: x\r\nAuthorization: {ROOT_BASIC_AUTH}\r\nContent-Length: 24\r\nConnection: close\r\n\r\nSELECT COUNT(*) FROM st;"
            ),
        )
        .await;
        assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
        assert!(resp.contains("[[2]]"), "{resp}");
    });

    // The shell with --tls-ca, and without.
    let out = std::process::Command::new(common::BIN)
        .args([
            "shell",
            "--host",
            &mnode.addr,
            "--tls-ca",
            &p(&cert),
            "--format",
            "csv",
            "-s",
            "SELECT COUNT(*) FROM db1.st",
        ])
        .output()
        .expect("shell");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(rows(&String::from_utf8_lossy(&out.stdout)), vec!["2"]);
    let out = std::process::Command::new(common::BIN)
        .args(["shell", "--host", &mnode.addr, "-s", "SELECT 1"])
        .output()
        .expect("shell");
    assert!(!out.status.success(), "plaintext shell must fail");

    // Plaintext HTTP to the TLS port: no HTTP answer.
    let mut s = std::net::TcpStream::connect(&http).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(
        !String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"),
        "plaintext HTTP was served"
    );
}
