//! Wrong or missing credentials are refused with a clear "Unauthenticated" on every door:
//! the gRPC login, gRPC calls without a token (mnode and data node), the shell, and the HTTP
//! API (401, except /ping and /health).

mod common;

use common::{basic_auth, http_request, http_request_raw, shell_as, Cluster, ROOT_BASIC_AUTH};
use tidal_common::StatusCode;
use tidal_proto::v1;

#[test]
fn wrong_password_is_refused_on_grpc_and_http() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http address");
    c.ok("", "CREATE DATABASE db1");
    c.ok("", "CREATE USER alice PASS 'right-pw'");
    c.ok("", "GRANT ALL ON db1 TO alice");

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // Login with a wrong password, an unknown user, and the right password.
        for (user, pw) in [("alice", "wrong-pw"), ("nobody", "x"), ("root", "")] {
            let e = match tidal_client::Client::connect_user(&c.mnode_addr, user, pw).await {
                Ok(_) => panic!("{user}/{pw} logged in"),
                Err(e) => e,
            };
            assert_eq!(e.code, StatusCode::Unauthenticated, "{user}: {e}");
            assert!(e.message.starts_with("Unauthenticated:"), "{e}");
        }
        let alice = tidal_client::Client::connect_user(&c.mnode_addr, "alice", "right-pw")
            .await
            .expect("right password");
        alice
            .execute("SHOW DATABASES", "")
            .await
            .expect("alice queries");

        // A call without any token, to the mnode and to a data node.
        let anon = tidal_client::Client::new_lazy(
            &c.mnode_addr,
            tidal_client::ConnectOptions::default()
                .with_credentials(tidal_client::Credentials::Forward),
        )
        .expect("client");
        let s = anon
            .mnode()
            .expect("stub")
            .list_databases(v1::Empty {})
            .await
            .expect_err("no token must be refused");
        assert_eq!(s.code(), tonic::Code::Unauthenticated);
        assert!(s.message().contains("no credentials"), "{}", s.message());
        let route = alice.route("db1").await.expect("route");
        let dnode_addr = route.vgroups[0].addr.clone();
        let s = anon
            .dnode(&dnode_addr)
            .expect("stub")
            .dnode_stats(v1::Empty {})
            .await
            .expect_err("no token must be refused by the data node");
        assert_eq!(s.code(), tonic::Code::Unauthenticated);
        let s = anon
            .sql()
            .expect("stub")
            .execute(v1::ExecuteRequest {
                sql: "SHOW DATABASES".into(),
                db: String::new(),
                timeout_ms: None,
            })
            .await
            .expect_err("SQL without a token must be refused");
        assert_eq!(s.code(), tonic::Code::Unauthenticated);
    });

    // The shell.
    let err = shell_as(&c.mnode_addr, "alice", "wrong-pw", "", "SHOW DATABASES").unwrap_err();
    assert!(
        err.contains("Unauthenticated: wrong user name or password for user 'alice'"),
        "{err}"
    );
    assert!(
        !err.contains("wrong-pw"),
        "the password must not be echoed: {err}"
    );
    shell_as(&c.mnode_addr, "alice", "right-pw", "", "SHOW DATABASES").expect("right password");

    // HTTP: no credentials, wrong ones, malformed ones; the right ones in each form.
    let sql = b"SHOW DATABASES";
    let (st, body) = http_request_raw(&http, "POST", "/rest/sql", &[], sql);
    assert_eq!(st, 401, "{body}");
    assert!(body.contains("Unauthenticated: no credentials"), "{body}");
    let wrong = basic_auth("alice", "wrong-pw");
    let (st, body) = http_request(
        &http,
        "POST",
        "/rest/sql",
        &[("Authorization", &wrong)],
        sql,
    );
    assert_eq!(st, 401, "{body}");
    assert!(body.contains("wrong user name or password"), "{body}");
    let (st, body) = http_request(
        &http,
        "POST",
        "/rest/sql",
        &[("Authorization", "Basic !!notbase64")],
        sql,
    );
    assert_eq!(st, 401, "{body}");
    assert!(body.contains("not base64"), "{body}");
    let (st, _) = http_request_raw(&http, "POST", "/write?db=db1", &[], b"m f=1");
    assert_eq!(st, 401);
    let (st, _) = http_request_raw(&http, "POST", "/write?db=db1&u=alice&p=nope", &[], b"m f=1");
    assert_eq!(st, 401);
    let (st, body) = http_request_raw(
        &http,
        "POST",
        "/write?db=db1&u=alice&p=right-pw",
        &[],
        b"m f=1i 1000",
    );
    assert_eq!(st, 204, "{body}");
    let (st, body) = http_request_raw(
        &http,
        "POST",
        "/api/v2/write?bucket=db1&precision=ms",
        &[("Authorization", "Token alice:right-pw")],
        b"m f=2i 2000",
    );
    assert_eq!(st, 204, "{body}");
    let (st, _) = http_request_raw(&http, "GET", "/metrics", &[], b"");
    assert_eq!(st, 401);
    let (st, _) = http_request_raw(
        &http,
        "GET",
        "/metrics",
        &[("Authorization", ROOT_BASIC_AUTH)],
        b"",
    );
    assert_eq!(st, 200);
    // Probes need no credentials.
    assert_eq!(http_request_raw(&http, "GET", "/ping", &[], b"").0, 204);
    assert_eq!(http_request_raw(&http, "GET", "/health", &[], b"").0, 200);
}
