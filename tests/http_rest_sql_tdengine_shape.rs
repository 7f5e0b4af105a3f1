//! `POST /rest/sql` and `POST /rest/sql/{db}` answer in the shape of TDengine's REST API 3.x:
//! DDL and INSERT as `affected_rows`, SELECT with `column_meta` (name, type, length), rows with
//! RFC 3339 timestamps in the database's precision and NULL as `null`.

mod common;

use common::{http_request, Cluster};
use serde_json::{json, Value};

fn sql(http: &str, path: &str, stmt: &str) -> (u16, Value) {
    let (status, body) = http_request(http, "POST", path, &[], stmt.as_bytes());
    let v =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{stmt}: not JSON ({e}): {body}"));
    (status, v)
}

fn affected(n: u64) -> Value {
    json!({"code": 0, "column_meta": [["affected_rows", "INT", 4]], "data": [[n]], "rows": 1})
}

#[test]
fn rest_sql_answers_in_tdengine_shape() {
    let c = Cluster::start_with_http(2);
    let http = c.http.clone().expect("http");

    assert_eq!(
        sql(&http, "/rest/sql", "CREATE DATABASE rest VGROUPS 2"),
        (200, affected(0))
    );
    // The path names the statement's database.
    assert_eq!(
        sql(
            &http,
            "/rest/sql/rest",
            "CREATE STABLE m (ts TIMESTAMP, v DOUBLE, n INT, s VARCHAR(10)) TAGS (loc VARCHAR(8))"
        ),
        (200, affected(0))
    );
    assert_eq!(
        sql(
            &http,
            "/rest/sql/rest",
            "INSERT INTO m_1 USING m TAGS ('a') VALUES (1451606400000, 1.5, 7, 'x') (1451606401000, NULL, NULL, NULL);"
        ),
        (200, affected(2))
    );

    let (status, v) = sql(
        &http,
        "/rest/sql",
        "SELECT ts, v, n, s FROM rest.m ORDER BY ts",
    );
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v,
        json!({
            "code": 0,
            "column_meta": [["ts", "TIMESTAMP", 8], ["v", "DOUBLE", 8], ["n", "INT", 4], ["s", "VARCHAR", 10]],
            "data": [
                ["2016-01-01T00:00:00.000Z", 1.5, 7, "x"],
                ["2016-01-01T00:00:01.000Z", null, null, null]
            ],
            "rows": 2
        })
    );

    // Aggregates, and a query with no rows.
    let (_, v) = sql(&http, "/rest/sql/rest", "SELECT COUNT(*), SUM(n) FROM m");
    assert_eq!(v["data"], json!([[2, 7]]), "{v}");
    assert_eq!(v["column_meta"][0][1], "BIGINT", "{v}");
    let (_, v) = sql(
        &http,
        "/rest/sql/rest",
        "SELECT ts FROM m WHERE ts > 1451606500000",
    );
    assert_eq!(
        (v["rows"].clone(), v["data"].clone()),
        (json!(0), json!([]))
    );

    // Timestamps keep the database's precision.
    sql(&http, "/rest/sql", "CREATE DATABASE rest_us PRECISION 'us'");
    sql(
        &http,
        "/rest/sql/rest_us",
        "CREATE STABLE m (ts TIMESTAMP, v DOUBLE) TAGS (loc VARCHAR(8))",
    );
    sql(
        &http,
        "/rest/sql/rest_us",
        "INSERT INTO m_1 USING m TAGS ('a') VALUES (1451606400000001, 2.0)",
    );
    let (_, v) = sql(&http, "/rest/sql/rest_us", "SELECT ts, v FROM m");
    assert_eq!(
        v["data"],
        json!([["2016-01-01T00:00:00.000001Z", 2.0]]),
        "{v}"
    );

    // SHOW answers like any query; USE in a body only affects that request.
    let (_, v) = sql(&http, "/rest/sql", "SHOW DATABASES");
    let names: Vec<&str> = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|r| r[0].as_str())
        .collect();
    assert!(names.contains(&"rest") && names.contains(&"rest_us"), "{v}");
    assert_eq!(sql(&http, "/rest/sql", "USE rest").1, affected(0));
    let (status, v) = sql(&http, "/rest/sql", "SELECT * FROM m");
    assert_eq!(status, 400, "{v}");
    assert!(
        v["desc"]
            .as_str()
            .unwrap_or("")
            .contains("no database selected"),
        "{v}"
    );
}
