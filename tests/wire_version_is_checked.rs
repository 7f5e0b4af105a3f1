//! Wire version negotiation: every request of the client library names its wire version
//! (`tidal-wire-version`) and every server answer names the server's. A server refuses a
//! request of another version (or an unreadable one) with WIRE_VERSION_MISMATCH naming both
//! versions, on the mnode and on the data nodes, before the login; a request without the key
//! (a generic gRPC tool) is served as the current version.

mod common;

use common::Cluster;
use tidal_proto::v1::auth_client::AuthClient;
use tidal_proto::v1::dnode_client::DnodeClient;
use tidal_proto::v1::{Empty, LoginRequest};
use tidal_proto::{STATUS_CODE_KEY, WIRE_VERSION, WIRE_VERSION_KEY};

fn login(version: Option<&str>) -> tonic::Request<LoginRequest> {
    let mut req = tonic::Request::new(LoginRequest {
        user: tidal_client::auth::DEFAULT_USER.into(),
        password: tidal_client::auth::DEFAULT_PASSWORD.into(),
    });
    if let Some(v) = version {
        req.metadata_mut()
            .insert(WIRE_VERSION_KEY, v.parse().expect("ascii"));
    }
    req
}

fn tidal_code(s: &tonic::Status) -> Option<u32> {
    s.metadata()
        .get(STATUS_CODE_KEY)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

#[test]
fn wire_version_is_checked() {
    let cluster = Cluster::start(1);
    let dnode_addr = cluster.dnodes[0].as_ref().expect("dnode").addr.clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut auth = AuthClient::connect(format!("http://{}", cluster.mnode_addr))
            .await
            .unwrap();

        // The current version, and none at all, are served; the answer names the version.
        for v in [Some("1"), None] {
            let r = auth.login(login(v)).await.unwrap();
            assert!(!r.get_ref().token.is_empty());
            assert_eq!(
                r.metadata()
                    .get(WIRE_VERSION_KEY)
                    .and_then(|v| v.to_str().ok()),
                Some(WIRE_VERSION.to_string().as_str())
            );
        }

        // Another version, or an unreadable one, is refused, naming both.
        let e = auth.login(login(Some("99"))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert_eq!(
            tidal_code(&e),
            Some(tidal_common::StatusCode::WireVersionMismatch.as_u32())
        );
        assert!(
            e.message().contains("wire version 99")
                && e.message()
                    .contains(&format!("this server speaks {WIRE_VERSION}")),
            "{}",
            e.message()
        );
        let e = auth.login(login(Some("v2"))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert!(
            e.message().contains("'v2' is not a version number"),
            "{}",
            e.message()
        );

        // A data node checks it too, before the credentials (none are sent here).
        let mut dnode = DnodeClient::connect(format!("http://{dnode_addr}"))
            .await
            .unwrap();
        let mut req = tonic::Request::new(Empty {});
        req.metadata_mut()
            .insert(WIRE_VERSION_KEY, "2".parse().unwrap());
        let e = dnode.dnode_stats(req).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
        assert!(e.message().contains("wire version 2"), "{}", e.message());
        // Without the key, the call reaches the authentication check.
        let e = dnode.dnode_stats(Empty {}).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e:?}");

        // The client library names its version on every call, so it works end to end.
        let c = tidal_client::Client::connect(&cluster.mnode_addr)
            .await
            .unwrap();
        c.execute("CREATE DATABASE wv VGROUPS 2", "").await.unwrap();
        let r = c.execute("SELECT 1", "wv").await.unwrap();
        assert_eq!(r.batch.unwrap().num_rows(), 1);
    });
}
