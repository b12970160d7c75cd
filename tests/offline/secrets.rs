//! Secrets stay secret: Secret values — `data`, `stringData`, a Secret's last-applied
//! annotation — fed through every path (check in every format, blame, managers, apply in text
//! and JSON with debug logs, invalid input, and the service's predictions, ownership queries,
//! applies and audit log) never appear in any output, log line or error.
//!
//! Secrets are a core kind the real apiserver does not serve, so the applies here run against
//! the fake, which merges with fieldguard's own engine: protocol only (what is printed and
//! logged), never the outcome of an apply.

use crate::support;

use base64::Engine;
use fieldguard::service::proto::{
    self as pb, analysis_client::AnalysisClient, ownership_client::OwnershipClient,
    releases_client::ReleasesClient,
};
use fieldguard::service::{self, Stores};
use std::process::Command;
use std::sync::Arc;

const LIVE: &str = "rotated-by-hand-91c2";
const MANIFEST: &str = "manifest-secret-7d1e";
const TOKEN: &str = "manifest-token-5b2a";
const ANNOTATION: &str = "annotation-secret-4c9f";

fn markers() -> Vec<String> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut m = Vec::new();
    for s in [LIVE, MANIFEST, TOKEN, ANNOTATION] {
        m.push(s.to_string());
        m.push(b64.encode(s));
    }
    m
}

fn assert_clean(what: &str, text: &str) {
    for m in markers() {
        assert!(!text.contains(&m), "{what} leaks {m:?}:\n{text}");
    }
}

fn manifest() -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: checkout-db\n  namespace: shop\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: '{{\"data\":{{\"password\":\"{ANNOTATION}\"}}}}'\ntype: Opaque\ndata:\n  password: {}\n  username: Y2hlY2tvdXQ=\nstringData:\n  token: {TOKEN}\n",
        b64.encode(MANIFEST)
    )
}

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fieldguard-secrets-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fieldguard"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn command_line_outputs_never_show_secret_values() {
    let d = dir("cli");
    let file = d.join("secret.yaml");
    std::fs::write(&file, manifest()).unwrap();
    let f = file.to_str().unwrap();
    let debug = [("FIELDGUARD_LOG", "debug")];
    for format in ["text", "json", "sarif", "junit"] {
        for force in [&[][..], &["--force-conflicts"][..]] {
            let mut args = vec![
                "check",
                "--snapshot",
                "examples/cluster",
                "-n",
                "shop",
                "--field-manager",
                "helm",
                "-o",
                format,
            ];
            args.extend_from_slice(force);
            args.push(f);
            let out = run(&args, &debug);
            assert!(out.contains("checkout-db"), "{out}");
            assert_clean(&format!("check -o {format} {force:?}"), &out);
        }
    }
    let out = run(
        &[
            "blame",
            "secret/checkout-db",
            "-n",
            "shop",
            "--snapshot",
            "examples/cluster",
        ],
        &debug,
    );
    assert!(out.contains("<redacted>"), "{out}");
    assert_clean("blame", &out);
    assert_clean("blame of the manifest", &run(&["blame", f], &debug));
    assert_clean(
        "managers",
        &run(
            &["managers", "--snapshot", "examples/cluster", "-o", "json"],
            &debug,
        ),
    );
    // Invalid input naming the Secret: located, never quoted.
    let bad = d.join("bad.yaml");
    std::fs::write(
        &bad,
        manifest().replace("  username: Y2hlY2tvdXQ=\n", "  username: [1]\n"),
    )
    .unwrap();
    let out = run(
        &[
            "check",
            "--snapshot",
            "examples/cluster",
            "-n",
            "shop",
            "--field-manager",
            "helm",
            bad.to_str().unwrap(),
        ],
        &debug,
    );
    assert!(out.contains("bad.yaml"), "{out}");
    assert_clean("invalid Secret", &out);

    // Applying it to a cluster, in text and JSON, with debug logs.
    let server = support::example_cluster();
    let kc = server.kubeconfig(&d, "shop");
    let kc = kc.to_str().unwrap();
    for output in ["text", "json"] {
        let out = run(
            &[
                "apply",
                "checkout",
                "-f",
                f,
                "-n",
                "shop",
                "--kubeconfig",
                kc,
                "--context",
                "fake",
                "--adopt",
                "--force-against",
                "kubectl-edit",
                "-o",
                output,
            ],
            &debug,
        );
        assert!(out.contains("checkout-db"), "{out}");
        assert_clean(&format!("apply -o {output}"), &out);
    }
    std::fs::remove_dir_all(&d).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_answers_never_show_secret_values() {
    use fieldguard::service::auth::{Auth, AuthConfig};
    let server = support::example_cluster();
    {
        let mut st = server.state.lock().unwrap();
        st.tokens
            .insert("ops-token".into(), ("ops".into(), vec![], vec![], false));
        st.grants
            .push(("ops".into(), "*".into(), "*".into(), String::new()));
    }
    let cache = support::cache_of(&server, "prod").await;
    let d = dir("service");
    let audit = d.join("audit.jsonl");
    let mut stores = Stores::single(
        "prod",
        cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
    );
    stores.allow_apply = true;
    stores.auth = Arc::new(Auth::new(
        AuthConfig {
            token_review: true,
            cache_ttl: std::time::Duration::from_secs(30),
            ..Default::default()
        },
        Some(server.api("shop").await),
    ));
    stores.audit = Arc::new(service::releases::AuditLog::to_file(&audit).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        service::serve_on(listener, stores, async {}, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    fn auth<T>(mut r: tonic::Request<T>) -> tonic::Request<T> {
        r.metadata_mut()
            .insert("authorization", "Bearer ops-token".parse().unwrap());
        r
    }
    let manifests = vec![pb::Manifest {
        name: "secret.yaml".into(),
        content: manifest().into_bytes(),
    }];
    let mut seen = String::new();
    for force in [
        None,
        Some(pb::ForcePolicy {
            mode: pb::ForceMode::All as i32,
            against: vec![],
        }),
    ] {
        let r = AnalysisClient::new(channel.clone())
            .predict_conflicts(auth(tonic::Request::new(pb::PredictRequest {
                field_manager: "helm".into(),
                manifests: manifests.clone(),
                default_namespace: "shop".into(),
                force,
                ..Default::default()
            })))
            .await
            .unwrap()
            .into_inner();
        seen.push_str(&format!("{r:?}\n"));
    }
    let mut own = OwnershipClient::new(channel.clone());
    let b = own
        .blame(auth(tonic::Request::new(pb::BlameRequest {
            object: Some(pb::ObjectRef {
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: "shop".into(),
                name: "checkout-db".into(),
            }),
            fresh: true,
            ..Default::default()
        })))
        .await
        .unwrap()
        .into_inner();
    assert!(
        b.lines.iter().any(|l| l.text.contains("<redacted>")),
        "{b:?}"
    );
    seen.push_str(&format!("{b:?}\n"));
    let mut s = own
        .who_owns(auth(tonic::Request::new(pb::WhoOwnsRequest {
            path_pattern: ".*".into(),
            ..Default::default()
        })))
        .await
        .unwrap()
        .into_inner();
    while let Some(x) = s.message().await.unwrap() {
        seen.push_str(&format!("{x:?}\n"));
    }
    let mut s = own
        .managed_by(auth(tonic::Request::new(pb::ManagedByRequest {
            manager: "kubectl-edit".into(),
            ..Default::default()
        })))
        .await
        .unwrap()
        .into_inner();
    while let Some(x) = s.message().await.unwrap() {
        seen.push_str(&format!("{x:?}\n"));
    }
    let mut events = ReleasesClient::new(channel.clone())
        .apply(auth(tonic::Request::new(pb::ApplyRequest {
            release: "checkout".into(),
            namespace: "shop".into(),
            manifests,
            adopt: true,
            force: Some(pb::ForcePolicy {
                mode: pb::ForceMode::Selective as i32,
                against: vec!["kubectl-edit".into()],
            }),
            ..Default::default()
        })))
        .await
        .unwrap()
        .into_inner();
    let mut deployed = false;
    while let Some(ev) = events.message().await.unwrap() {
        if let Some(pb::apply_event::Event::Result(r)) = &ev.event {
            deployed = r.status == "deployed";
        }
        seen.push_str(&format!("{ev:?}\n"));
    }
    assert!(deployed, "{seen}");
    assert!(seen.contains("checkout-db"));
    assert_clean("service answers", &seen);
    assert_clean("audit log", &std::fs::read_to_string(&audit).unwrap());
    let _ = stop_tx.send(());
    let _ = done.await;
    cache.stop();
    std::fs::remove_dir_all(&d).ok();
}
