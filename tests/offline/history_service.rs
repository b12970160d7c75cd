//! Protocol of the ownership history: `Ownership.History` (filters, pages, per-object
//! authorization), `Ownership.WatchTransitions`, `Ownership.Fights`, the Prometheus metrics,
//! and `fieldguard history` / `fieldguard fights --server`. The fake apiserver only delivers
//! the managedFields the test writes (no merging): what changed hands is computed by
//! fieldguard from them. The outcome against kube-apiserver's own field manager is judged in
//! `tests/real/history.rs`.

use crate::support;

use fieldguard::cache::{CacheConfig, ClusterCache};
use fieldguard::service::proto::{self as pb, ownership_client::OwnershipClient};
use fieldguard::service::{self, Stores};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// A ConfigMap (or Secret) whose `data.mode` is owned by `owner`.
fn object(kind: &str, name: &str, owner: &str, op: &str, mode: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind,
           "metadata": {"name": name, "namespace": "shop", "managedFields": [
               {"manager": owner, "operation": op, "apiVersion": "v1",
                "time": "2026-11-26T06:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:mode": {}}}}]},
           "data": {"mode": mode}})
}

fn authorized<T>(msg: T, token: &str) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

/// Waits until the history holds `n` transitions (hang guard 60 s).
async fn recorded(cache: &ClusterCache, n: usize) {
    let h = cache.history.clone().unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while h.usage().0 < n {
        assert!(
            std::time::Instant::now() < until,
            "{} of {n} recorded",
            h.usage().0
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_fights_and_transitions_over_grpc_and_the_command_line() {
    let server = support::example_cluster();
    {
        let mut st = server.state.lock().unwrap();
        let aud = vec!["fieldguard".to_string()];
        st.tokens.insert(
            "alice-token".into(),
            ("alice".into(), vec![], aud.clone(), false),
        );
        st.tokens
            .insert("root-token".into(), ("root".into(), vec![], aud, false));
        st.grants.push((
            "alice".into(),
            "get".into(),
            "configmaps".into(),
            "shop".into(),
        ));
        st.grants
            .push(("root".into(), "get".into(), "*".into(), String::new()));
        st.put(object("ConfigMap", "flip", "helm", "Apply", "blue"));
        st.put(object("Secret", "creds", "helm", "Apply", "c2VjcmV0"));
    }
    let config = CacheConfig {
        full_kinds: vec!["ConfigMap".into(), "Secret".into()],
        history: Some(fieldguard::history::HistoryConfig::default()),
        ..CacheConfig::default()
    };
    let cache = ClusterCache::start("prod", server.api("shop").await, config)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .unwrap();
    // A hand edit and a forcing pipeline fight over data.mode; the Secret changes hands once.
    {
        let mut st = server.state.lock().unwrap();
        for (owner, op, mode) in [
            ("kubectl-edit", "Update", "green"),
            ("helm", "Apply", "blue"),
            ("kubectl-edit", "Update", "green"),
            ("helm", "Apply", "blue"),
        ] {
            st.put(object("ConfigMap", "flip", owner, op, mode));
        }
    }
    // Kinds are watched apart, so their order is only fixed by waiting in between.
    recorded(&cache, 4).await;
    server
        .state
        .lock()
        .unwrap()
        .put(object("Secret", "creds", "ops", "Update", "bmV3"));
    recorded(&cache, 5).await;

    let store = cache.clone() as Arc<dyn fieldguard::live::state::LiveState>;
    let mut stores = Stores::single("prod", store);
    stores.auth = Arc::new(service::auth::Auth::new(
        service::auth::AuthConfig {
            token_review: true,
            audiences: vec!["fieldguard".into()],
            ..Default::default()
        },
        Some(server.api("shop").await),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(service::serve_on(
        listener,
        stores,
        async {},
        std::future::pending(),
    ));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut own = OwnershipClient::new(channel);

    // Everything, for a caller who may read everything; the Secret's values redacted.
    let all = own
        .history(authorized(pb::HistoryRequest::default(), "root-token"))
        .await
        .unwrap()
        .into_inner();
    let seen: Vec<(String, String, String, String, String)> = all
        .transitions
        .iter()
        .map(|t| {
            (
                t.object.as_ref().unwrap().name.clone(),
                t.change.clone(),
                t.from.join(","),
                t.to.join(","),
                t.new_value.clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "flip".into(),
                "taken-over".into(),
                "helm".into(),
                "kubectl-edit".into(),
                "\"green\"".into()
            ),
            (
                "flip".into(),
                "taken-over".into(),
                "kubectl-edit".into(),
                "helm".into(),
                "\"blue\"".into()
            ),
            (
                "flip".into(),
                "taken-over".into(),
                "helm".into(),
                "kubectl-edit".into(),
                "\"green\"".into()
            ),
            (
                "flip".into(),
                "taken-over".into(),
                "kubectl-edit".into(),
                "helm".into(),
                "\"blue\"".into()
            ),
            (
                "creds".into(),
                "taken-over".into(),
                "helm".into(),
                "ops".into(),
                "\"<redacted>\"".into()
            ),
        ]
    );
    assert_eq!((all.next_after, all.oldest), (0, 1));
    assert!(!format!("{all:?}").contains("bmV3") && !format!("{all:?}").contains("c2VjcmV0"));
    // Pages: two at a time, resumed where the last ended.
    let page = |after: u64| pb::HistoryRequest {
        after,
        limit: 2,
        ..Default::default()
    };
    let p1 = own
        .history(authorized(page(0), "root-token"))
        .await
        .unwrap()
        .into_inner();
    let p2 = own
        .history(authorized(page(p1.next_after), "root-token"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        p1.transitions
            .iter()
            .chain(&p2.transitions)
            .map(|t| t.seq)
            .collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    // Filters: one manager's, one path's.
    let f = own
        .history(authorized(
            pb::HistoryRequest {
                manager: "ops".into(),
                ..Default::default()
            },
            "root-token",
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(f.transitions.len(), 1);
    // Alice may read ConfigMaps only: the Secret's change is not shown to her.
    let a = own
        .history(authorized(pb::HistoryRequest::default(), "alice-token"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.transitions.len(), 4);
    assert!(
        a.transitions
            .iter()
            .all(|t| t.object.as_ref().unwrap().kind == "ConfigMap")
    );

    // The fight: data.mode between helm and kubectl-edit, four flips, going on.
    let fights = own
        .fights(authorized(pb::FightsRequest::default(), "alice-token"))
        .await
        .unwrap()
        .into_inner()
        .fights;
    assert_eq!(fights.len(), 1);
    let f = &fights[0];
    assert_eq!(
        (f.path.as_str(), f.managers.clone(), f.flips, f.active),
        (
            ".data.mode",
            vec!["helm".to_string(), "kubectl-edit".to_string()],
            4,
            true
        )
    );
    assert_eq!(f.values, ["\"green\"", "\"blue\""]);

    // Metrics: takeovers per kind, fights going on.
    let metrics = fieldguard::telemetry::metrics::global().encode();
    assert!(
        metrics
            .contains(r#"fieldguard_ownership_transfers_total{cluster="prod",kind="ConfigMap"} 4"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"fieldguard_active_fights{cluster="prod",kind="ConfigMap"} 1"#));

    // WatchTransitions: what happens from now on, as it happens.
    let mut stream = own
        .watch_transitions(authorized(
            pb::HistoryRequest {
                kind: "ConfigMap".into(),
                ..Default::default()
            },
            "alice-token",
        ))
        .await
        .unwrap()
        .into_inner();
    server
        .state
        .lock()
        .unwrap()
        .put(object("ConfigMap", "flip", "kubectl-edit", "Update", "red"));
    let next = tokio::time::timeout(Duration::from_secs(60), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((next.seq, next.new_value.as_str()), (6, "\"red\""));
    // A caller that goes away leaves no subscriber behind, transitions or not.
    drop(stream);
    let h = cache.history.clone().unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while h.subscribers() > 0 {
        assert!(
            std::time::Instant::now() < until,
            "the subscription outlived its caller"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // No history kept: said so.
    let plain = support::cache_of(&server, "plain").await;
    let plain_channel = support::serve(Stores::single(
        "plain",
        plain as Arc<dyn fieldguard::live::state::LiveState>,
    ))
    .await;
    let e = OwnershipClient::new(plain_channel)
        .history(pb::HistoryRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("--history"), "{}", e.message());

    // The command line, against the service.
    let run = |args: &'static [&'static str]| {
        let addr = addr.to_string();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_fieldguard"))
                .args(args)
                .args(["--server", &addr])
                .env("FIELDGUARD_TOKEN", "alice-token")
                .output()
                .unwrap()
        })
    };
    let out = run(&["history", "--path", ".data.mode", "-o", "json"])
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(
        (lines[4]["from"][0].as_str(), lines[4]["newValue"].as_str()),
        (Some("helm"), Some("\"red\""))
    );
    let out = run(&["fights", "--active"]).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(
            "ACTIVE  ConfigMap shop/flip  .data.mode  5 flips between helm, kubectl-edit"
        ),
        "{text}"
    );
}
