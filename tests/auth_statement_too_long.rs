//! A statement longer than 1 MiB (TDengine's maximum SQL length) is refused with a clear
//! error over gRPC and HTTP, and the server keeps serving.

mod common;

use common::{http_request, Cluster};
use tidal_common::StatusCode;

#[test]
fn statement_too_long_is_refused() {
    let c = Cluster::start_with_http(1);
    let http = c.http.clone().expect("http");
    let long = format!("SELECT 1 -- {}", "x".repeat(tidal_sql::SQL_BYTES_MAX));

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let client = tidal_client::Client::connect(&c.mnode_addr)
            .await
            .expect("connect");
        let e = client.execute(&long, "").await.expect_err("too long");
        assert_eq!(e.code, StatusCode::InvalidArgument, "{e}");
        assert!(
            e.message.contains("SQL statement too long")
                && e.message.contains("the limit is 1048576 bytes"),
            "{e}"
        );
        client
            .execute("SHOW DATABASES", "")
            .await
            .expect("still serving");
    });

    let (st, body) = http_request(&http, "POST", "/rest/sql", &[], long.as_bytes());
    assert!(st == 413 || st == 400, "{st} {body}");
    assert!(
        body.contains("too long") || body.contains("limit"),
        "{body}"
    );
    let (st, _) = http_request(&http, "POST", "/rest/sql", &[], b"SHOW DATABASES");
    assert_eq!(st, 200);
}
