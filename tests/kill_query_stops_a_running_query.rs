//! KILL QUERY stops a running query: a long scan started on one connection shows in SHOW
//! QUERIES on another, KILL QUERY makes it fail with "query <id> was killed" at once, it
//! leaves the registry, and the data nodes stop working on it (their CPU goes quiet) instead
//! of finishing the scan for nobody. Both for a query the server plans and runs and for one
//! the client library plans and runs itself (listed through its reports to the server; the
//! kill reaches it in the answer to its next report).

mod common;

use common::Cluster;
use std::time::{Duration, Instant};
use tidal_client::query::QUERY_REPORT_INTERVAL_MS;
use tidal_client::{Client, ConnectOptions};
use tidal_common::{SchemaVersion, Value};

const SUBTABLES: usize = 8;
/// Enough rows that the query outlasts what the test waits for before its kill lands (up to a
/// second to be listed, the 1 s observation, and for a locally planned query up to a second
/// more for the kill to reach the client with its next report): with a third as many, a
/// locally planned query on the 2-core test machine finished 2.7 s after its start, before
/// its kill arrived.
const ROWS_PER_SUBTABLE: usize = 750_000;
const WRITE_ROWS: usize = 25_000;
/// Every row is its own window, and the filter formats each value twelve times: the vnodes
/// spend microseconds on every row whatever the build (a plain per-row window scan ends
/// within the test's 1 s observation), and the filter defeats block statistics, so nothing is
/// answered from metadata. It fits SHOW QUERIES' 512 characters.
const LONG_QUERY: &str = concat!(
    "SELECT COUNT(*), AVG(v), STDDEV(v), SPREAD(v) FROM m WHERE ",
    "LENGTH(CONCAT(CAST(v*1 AS VARCHAR(24)), CAST(v*3 AS VARCHAR(24)), CAST(v*5 AS VARCHAR(24)), CAST(v*7 AS VARCHAR(24)))) + ",
    "LENGTH(CONCAT(CAST(v*11 AS VARCHAR(24)), CAST(v*13 AS VARCHAR(24)), CAST(v*17 AS VARCHAR(24)), CAST(v*19 AS VARCHAR(24)))) + ",
    "LENGTH(CONCAT(CAST(v*23 AS VARCHAR(24)), CAST(v*29 AS VARCHAR(24)), CAST(v*31 AS VARCHAR(24)), CAST(v*37 AS VARCHAR(24)))) > 0 INTERVAL(1a)",
);

/// CPU time (user + system) the process has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name (which may contain spaces) in ")" ... ; utime and stime
    // are fields 14 and 15 of the line, 12 and 13 after the ") ".
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}

fn dnodes_cpu(c: &Cluster) -> Duration {
    c.dnodes
        .iter()
        .flatten()
        .map(|p| cpu_time(p.child.id()))
        .sum()
}

#[test]
fn kill_query_stops_a_running_query() {
    // SHOW QUERIES shows at most 512 characters of a statement, and the test finds it by text.
    assert!(LONG_QUERY.len() <= 512, "{}", LONG_QUERY.len());
    let cluster = Cluster::start(2);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = Client::connect(&cluster.mnode_addr).await.unwrap();
        common::load_scan_data(&c, "kq", SUBTABLES, ROWS_PER_SUBTABLE, WRITE_ROWS).await;
        assert_eq!(c.stable("kq", "m").await.unwrap().version, SchemaVersion(1));
        let total = c
            .execute("SELECT COUNT(*) FROM m", "kq")
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(
            total.row(0)[0],
            Value::Int((SUBTABLES * ROWS_PER_SUBTABLE) as i64)
        );

        for locally in [false, true] {
            run_and_kill(&cluster, locally).await;
        }

        // The cluster still answers queries.
        let n = c
            .execute("SELECT COUNT(*) FROM m WHERE v >= 0", "kq")
            .await
            .unwrap()
            .batch
            .unwrap();
        assert_eq!(
            n.row(0)[0],
            Value::Int((SUBTABLES * ROWS_PER_SUBTABLE) as i64)
        );
    });
}

/// Starts LONG_QUERY on a new connection (planned by the server or by the client library),
/// finds it in SHOW QUERIES from another, kills it, and checks that it and the data nodes'
/// work on it stop.
async fn run_and_kill(cluster: &Cluster, locally: bool) {
    // The long query, on its own connection and with no timeout, planned and run by the
    // server or by the client library.
    let options = ConnectOptions::default().plan_queries_locally(locally);
    let runner = Client::connect_with(&cluster.mnode_addr, options)
        .await
        .unwrap();
    let started = Instant::now();
    let query = tokio::spawn(async move {
        let r = runner.execute_with_timeout(LONG_QUERY, "kq", Some(0)).await;
        (r, Instant::now())
    });

    // Another connection finds it in SHOW QUERIES, with its fragments on the vnodes.
    let observer = Client::connect(&cluster.mnode_addr).await.unwrap();
    let id = loop {
        assert!(
            !query.is_finished(),
            "the query ended before it could be killed: {:?}",
            started.elapsed()
        );
        assert!(started.elapsed() < Duration::from_secs(30), "never listed");
        let list = observer
            .execute("SHOW QUERIES", "")
            .await
            .unwrap()
            .batch
            .unwrap();
        let col = |name: &str| list.fields.iter().position(|f| f.name == name).unwrap();
        let found = (0..list.num_rows()).map(|r| list.row(r)).find(|row| {
            row[col("sql")] == Value::Str(LONG_QUERY.into())
                && row[col("state")] == Value::Str("executing".into())
        });
        if let Some(row) = found {
            assert_eq!(row[col("user")], Value::Str("root".into()));
            assert_eq!(row[col("kind")], Value::Str("query".into()));
            assert!(matches!(row[col("sub_num")], Value::Int(n) if n >= 1));
            let Value::Str(id) = &row[col("kill_id")] else {
                panic!("kill_id {:?}", row[col("kill_id")]);
            };
            break id.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // The data nodes are busy with it before the kill...
    let before = dnodes_cpu(cluster);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let busy = dnodes_cpu(cluster) - before;
    assert!(
        !query.is_finished(),
        "the query ended before it could be killed: make the data set larger"
    );
    // (2 cores shared with whatever else runs: a loose bound.)
    assert!(
        busy >= Duration::from_millis(250),
        "the data nodes used only {busy:?} of CPU in 1 s while scanning"
    );

    let killed_at = Instant::now();
    observer
        .execute(&format!("KILL QUERY '{id}'"), "")
        .await
        .unwrap();
    let (result, ended) = query.await.unwrap();
    let Err(err) = result else {
        panic!(
            "a killed query must fail: ended {:?} after start, {:?} after the kill",
            ended - started,
            ended.checked_duration_since(killed_at)
        );
    };
    assert_eq!(err.message, format!("query {id} was killed"));
    let took = ended - killed_at;
    // A locally run query learns of its kill from the answer to its next report.
    let kill_reach = Duration::from_secs(2)
        + Duration::from_millis(if locally { QUERY_REPORT_INTERVAL_MS } else { 0 });
    eprintln!("the query ended {took:?} after KILL");
    assert!(took < kill_reach, "the query ended {took:?} after KILL");

    // It left the registry (a local one with the client's next report), and killing it
    // again says so.
    let listed_until = Instant::now() + kill_reach;
    loop {
        let list = observer
            .execute("SHOW QUERIES", "")
            .await
            .unwrap()
            .batch
            .unwrap();
        let sql = list.fields.iter().position(|f| f.name == "sql").unwrap();
        if (0..list.num_rows()).all(|r| list.row(r)[sql] != Value::Str(LONG_QUERY.into())) {
            break;
        }
        assert!(
            locally && Instant::now() < listed_until,
            "the killed query is still listed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Err(again) = observer.execute(&format!("KILL QUERY '{id}'"), "").await else {
        panic!("killing a finished query must fail");
    };
    assert!(
        again.message.contains("no running query"),
        "{}",
        again.message
    );

    // ... and stop working on it soon after: within 3 s of its end they are nearly idle for
    // half a second (a data node ends the chunk of rows it is filtering first, and in a debug
    // build one chunk of this filter takes hundreds of ms; a scan that went on would keep
    // them at about a second of CPU per second for several seconds more).
    let quiet_by = ended + Duration::from_secs(3);
    let mut windows = Vec::new();
    loop {
        let before = dnodes_cpu(cluster);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let used = dnodes_cpu(cluster) - before;
        windows.push(used);
        if used <= Duration::from_millis(50).min(busy / 6) {
            break;
        }
        assert!(
            Instant::now() < quiet_by,
            "the data nodes kept working after the kill: CPU per 500 ms {windows:?} (busy: \
             {busy:?} per second)"
        );
    }
    eprintln!("data-node CPU: {busy:?} per second scanning, per 500 ms after the kill {windows:?}");
}
