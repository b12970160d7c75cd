//! The gRPC service end to end over loopback: health (not serving until ready), reflection,
//! predictions (unary and streamed, equal to the CLI's), ownership queries, error details.

use crate::support;

use fieldguard::cache::ClusterCache;
use fieldguard::catalog::{Catalog, DEFAULT_KUBERNETES};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::live::state::SnapshotState;
use fieldguard::manifest::Input;
use fieldguard::service::proto::{
    self as pb, analysis_client::AnalysisClient, ownership_client::OwnershipClient,
};
use fieldguard::service::{self, Stores};
use std::path::PathBuf;
use std::sync::Arc;
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn store() -> Arc<SnapshotState> {
    let snap = Snapshot::load(
        &[Input::Path(root().join("examples/cluster"))],
        &mut std::io::empty(),
    )
    .unwrap();
    let mut c = Catalog::kubernetes(DEFAULT_KUBERNETES).unwrap();
    snap.extend_catalog(&mut c).unwrap();
    Arc::new(SnapshotState::new(snap, c))
}

struct Running {
    channel: Channel,
    addr: std::net::SocketAddr,
    ready: Option<tokio::sync::oneshot::Sender<()>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Resolves when the server has taken the stop (its shutdown future has completed).
    stopping: Option<tokio::sync::oneshot::Receiver<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops the service and waits for it to finish.
    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.done.await;
    }
}

async fn start() -> Running {
    start_with(Stores::single("example", store())).await
}

async fn start_with(stores: Stores) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        service::serve_on(
            listener,
            stores,
            async {
                let _ = ready_rx.await;
            },
            async {
                let _ = stop_rx.await;
                let _ = stopping_tx.send(());
            },
        )
        .await
        .unwrap();
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    Running {
        channel,
        addr,
        ready: Some(ready_tx),
        stop: Some(stop_tx),
        stopping: Some(stopping_rx),
        done,
    }
}

fn release() -> Vec<pb::Manifest> {
    let path = "examples/release/checkout.yaml";
    vec![pb::Manifest {
        name: path.into(),
        content: std::fs::read(root().join(path)).unwrap(),
    }]
}

fn request() -> pb::PredictRequest {
    pb::PredictRequest {
        field_manager: "helm".into(),
        manifests: release(),
        default_namespace: "shop".into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn health_turns_serving_when_ready_and_reflection_lists_the_api() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let mut s = start().await;
    let mut health = HealthClient::new(s.channel.clone());
    let ask = |svc: &str| HealthCheckRequest {
        service: svc.into(),
    };
    let st = health.check(ask("")).await.unwrap().into_inner().status;
    assert_eq!(st, ServingStatus::NotServing as i32);
    let st = health
        .check(ask("liveness"))
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(st, ServingStatus::Serving as i32, "alive before ready");
    // Health.Watch delivers the change when it happens.
    let mut watch = health
        .watch(ask("fieldguard.v1.Analysis"))
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap().status;
    assert_eq!(first, ServingStatus::NotServing as i32);
    s.ready.take().unwrap().send(()).unwrap();
    let next = tokio::time::timeout(std::time::Duration::from_secs(60), watch.message())
        .await
        .expect("health changes once ready")
        .unwrap()
        .unwrap()
        .status;
    assert_eq!(next, ServingStatus::Serving as i32);
    // An open stream would hold a graceful shutdown: done with it.
    drop(watch);
    let st = health
        .check(ask("fieldguard.v1.Ownership"))
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(st, ServingStatus::Serving as i32);

    // Reflection v1: the services are listed and the API's file is served.
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let mut refl = ServerReflectionClient::new(s.channel.clone());
    let reqs = vec![
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        },
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(
                "fieldguard.v1.Analysis".into(),
            )),
        },
    ];
    let mut stream = refl
        .server_reflection_info(tokio_stream::iter(reqs))
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = first.message_response else {
        panic!("{first:?}")
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for want in [
        "fieldguard.v1.Analysis",
        "fieldguard.v1.Ownership",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == want), "{names:?}");
    }
    let second = stream.message().await.unwrap().unwrap();
    let Some(MessageResponse::FileDescriptorResponse(fd)) = second.message_response else {
        panic!("{second:?}")
    };
    assert!(!fd.file_descriptor_proto.is_empty());
    // v1alpha too (older grpcurl).
    let mut alpha =
        tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient::new(
            s.channel.clone(),
        );
    let r = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest::ListServices(
                String::new(),
            ),
        ),
    };
    let mut st = alpha
        .server_reflection_info(tokio_stream::iter(vec![r]))
        .await
        .unwrap()
        .into_inner();
    assert!(st.message().await.unwrap().is_some());

    // Graceful shutdown: the server stops when asked.
    s.stop.take().unwrap().send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), s.done)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn predictions_match_the_cli_unary_and_streamed() {
    let s = start().await;
    let mut a = AnalysisClient::new(s.channel.clone());
    let resp = a.predict_conflicts(request()).await.unwrap().into_inner();
    assert_eq!(resp.clusters.len(), 1);
    let c = &resp.clusters[0];
    assert_eq!(c.cluster, "example");
    let sum = c.summary.unwrap();
    assert_eq!(
        (sum.objects, sum.conflicted, sum.conflicts, sum.created),
        (6, 3, 5, 1)
    );
    let dep = c
        .objects
        .iter()
        .find(|o| o.object.as_ref().unwrap().kind == "Deployment")
        .unwrap();
    assert_eq!(
        serde_json::json!(dep.resource_version),
        support::example_object("Deployment")["metadata"]["resourceVersion"]
    );
    assert_eq!(dep.verdict, pb::Verdict::Conflict as i32);
    assert_eq!(dep.conflicts[0].path, ".spec.replicas");
    assert_eq!(dep.conflicts[0].line, 56);
    assert_eq!(dep.conflicts[0].current_json, "5");
    assert_eq!(dep.conflicts[0].owners[0].subresource, "scale");
    assert_eq!(dep.conflicts[0].suggestions[0].action, "drop-field");
    assert!(
        dep.message.starts_with("Apply failed with 3 conflicts"),
        "{}",
        dep.message
    );
    let secret = c
        .objects
        .iter()
        .find(|o| o.object.as_ref().unwrap().kind == "Secret")
        .unwrap();
    assert_eq!(secret.conflicts[0].current_json, "\"<redacted>\"");

    // Streamed: header, then manifests one by one; same objects back.
    let mut header = request();
    header.manifests.clear();
    let mut parts = vec![pb::PredictStreamRequest {
        part: Some(pb::predict_stream_request::Part::Header(header)),
    }];
    for m in release() {
        parts.push(pb::PredictStreamRequest {
            part: Some(pb::predict_stream_request::Part::Manifest(m)),
        });
    }
    let mut st = a
        .predict_conflicts_stream(tokio_stream::iter(parts))
        .await
        .unwrap()
        .into_inner();
    let mut streamed = Vec::new();
    while let Some(o) = st.message().await.unwrap() {
        streamed.push(o);
    }
    assert_eq!(streamed, c.objects);

    // Forced: takeovers instead of conflicts.
    let mut forced = request();
    forced.force = Some(pb::ForcePolicy {
        mode: pb::ForceMode::All as i32,
        against: vec![],
    });
    let f = a.predict_conflicts(forced).await.unwrap().into_inner();
    assert_eq!(f.clusters[0].summary.unwrap().taken_over, 5);

    // Helm hooks: listed per phase for the operation asked, the rest said not to run.
    let mut hooked = request();
    hooked.operation = "upgrade".into();
    hooked.manifests.push(pb::Manifest {
        name: "hooks.yaml".into(),
        content: b"apiVersion: batch/v1
kind: Job
metadata: {name: migrate, annotations: {helm.sh/hook: pre-upgrade}}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: 'm:1'}]}}}
---
apiVersion: v1
kind: Pod
metadata: {name: checkout-test, annotations: {helm.sh/hook: test}}
spec: {containers: [{name: t, image: 't:1'}]}
"
        .to_vec(),
    });
    let h = a
        .predict_conflicts(hooked.clone())
        .await
        .unwrap()
        .into_inner();
    let c = &h.clusters[0];
    let plan = c.hooks.as_ref().unwrap();
    assert_eq!(
        (plan.operation.as_str(), plan.inferred.as_str()),
        ("upgrade", "")
    );
    assert_eq!(
        plan.not_run,
        ["Pod shop/checkout-test: runs on test, not on upgrade"]
    );
    let first = &c.objects[0];
    assert_eq!(first.object.as_ref().unwrap().name, "migrate");
    assert_eq!(first.hook.as_ref().unwrap().event, "pre-upgrade");
    assert_eq!(c.objects.len(), 7);
    hooked.operation = "deploy".into();
    let e = a.predict_conflicts(hooked).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message().contains("unknown operation \"deploy\""),
        "{}",
        e.message()
    );
}

#[tokio::test]
async fn invalid_requests_carry_located_bad_request_details() {
    let s = start().await;
    let mut a = AnalysisClient::new(s.channel.clone());
    let mut r = request();
    r.manifests.push(pb::Manifest {
        name: "bad.yaml".into(),
        content: b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n".to_vec(),
    });
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let d = e.get_error_details();
    let br = d.bad_request().expect("BadRequest detail");
    assert_eq!(br.field_violations.len(), 1);
    assert!(
        br.field_violations[0]
            .description
            .starts_with("bad.yaml:5: document 1"),
        "{:?}",
        br.field_violations
    );
    assert_eq!(d.error_info().unwrap().reason, "INVALID_MANIFEST");
    assert_eq!(d.error_info().unwrap().domain, "fieldguard.dev");

    let mut r = request();
    r.field_manager.clear();
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(
        e.get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field,
        "field_manager"
    );

    let mut r = request();
    r.cluster = "nope".into();
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "UNKNOWN_CLUSTER"
    );

    // Violations are keyed by the manifest's index, as the API documents.
    let mut r = request();
    r.manifests.push(pb::Manifest {
        name: "second.yaml".into(),
        content: b"kind: ConfigMap\n".to_vec(),
    });
    let index = r.manifests.len() - 1;
    let e = a.predict_conflicts(r).await.unwrap_err();
    let br = e.get_error_details().bad_request().unwrap().clone();
    assert_eq!(
        br.field_violations[0].field,
        format!("manifests[{index}]"),
        "{br:?}"
    );

    // A force policy that cannot be read is refused, never taken as "no force".
    for (mode, against) in [(7, vec![]), (pb::ForceMode::Selective as i32, vec![])] {
        let mut r = request();
        r.force = Some(pb::ForcePolicy { mode, against });
        let e = a.predict_conflicts(r).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert_eq!(
            e.get_error_details().error_info().unwrap().reason,
            "INVALID_FORCE_POLICY"
        );
    }

    // Secret values are never in a violation, whatever their type.
    let mut r = request();
    r.manifests = vec![pb::Manifest {
        name: "secret.yaml".into(),
        content: b"apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: shop}\nstringData: {PIN: 73915284}\n".to_vec(),
    }];
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let text = format!("{e:?}{:?}", e.get_error_details());
    assert!(!text.contains("73915284"), "{text}");
    assert!(text.contains("expected string, got integer"), "{text}");

    // No object at all is refused unless allowed.
    let mut r = request();
    r.manifests = vec![pb::Manifest {
        name: "empty.yaml".into(),
        content: b"# nothing\n".to_vec(),
    }];
    let e = a.predict_conflicts(r.clone()).await.unwrap_err();
    assert_eq!(
        e.get_error_details().error_info().unwrap().reason,
        "NO_OBJECTS"
    );
    r.allow_empty = true;
    a.predict_conflicts(r).await.unwrap();

    let mut r = request();
    r.force = Some(pb::ForcePolicy {
        mode: pb::ForceMode::Selective as i32,
        against: vec!["(".into()],
    });
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(
        e.get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field,
        "force.against"
    );

    // A stream without its header.
    let parts = vec![pb::PredictStreamRequest {
        part: Some(pb::predict_stream_request::Part::Manifest(
            release().remove(0),
        )),
    }];
    let e = a
        .predict_conflicts_stream(tokio_stream::iter(parts))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
}

/// The server enforces the caller's `grpc-timeout` (sent as a header only, so no client-side
/// timer is involved): the work provably outlasts the deadline, because the apiserver's
/// answer it needs is held back until the test has its error.
/// Requests whose size would set the work: refused, located, before any of it is done.
#[tokio::test]
async fn hostile_request_dimensions_are_refused_before_the_work() {
    let mut stores = Stores::single("example", store());
    let second = stores.by_name["example"].clone();
    stores.by_name.insert("copy".into(), second);
    let s = start_with(stores).await;
    let mut a = AnalysisClient::new(s.channel.clone());
    let reason = |e: &tonic::Status| e.get_error_details().error_info().unwrap().reason.clone();

    // 60,000 force patterns (each would be a compiled regex).
    let mut r = request();
    r.force = Some(pb::ForcePolicy {
        mode: pb::ForceMode::Selective as i32,
        against: (0..60_000).map(|i| format!("m{i}")).collect(),
    });
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert_eq!(reason(&e), "INVALID_FORCE_POLICY");
    assert!(
        e.message()
            .contains("60000 patterns, more than the 64 allowed"),
        "{}",
        e.message()
    );

    // A million clusters (each a whole prediction), and one named twice.
    let mut r = request();
    r.clusters = vec![String::new(); 1_000_000];
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(reason(&e), "TOO_MANY_CLUSTERS");
    assert_eq!(
        e.message(),
        "clusters names 1000000 clusters; this service has 2"
    );
    let mut r = request();
    r.clusters = vec!["copy".into(), "copy".into()];
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(reason(&e), "DUPLICATE_CLUSTER");
    assert_eq!(
        e.get_error_details()
            .bad_request()
            .unwrap()
            .field_violations[0]
            .field,
        "clusters[1]"
    );
    let mut r = request();
    r.clusters = vec!["copy".into(), "example".into()];
    assert_eq!(
        a.predict_conflicts(r)
            .await
            .unwrap()
            .into_inner()
            .clusters
            .len(),
        2
    );

    // An unknown cluster's name is echoed quoted and bounded.
    let mut r = request();
    r.cluster = format!("\x1b[31m{}", "n".repeat(10_000));
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(reason(&e), "UNKNOWN_CLUSTER");
    assert!(
        e.message().starts_with("no cluster \"\\x1b[31mnnn"),
        "{}",
        e.message()
    );
    assert!(e.message().len() < 400, "{}", e.message().len());

    // A manifest name with control characters is refused, not echoed raw.
    let mut r = request();
    r.manifests[0].name = "evil\x1b]0;x\x07\nname.yaml".into();
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(reason(&e), "INVALID_MANIFEST_NAME");
    let details = e.get_error_details();
    let v = &details.bad_request().unwrap().field_violations[0];
    assert_eq!(v.field, "manifests[0].name");
    assert!(
        !v.description.contains('\x1b') && !v.description.contains('\n'),
        "{v:?}"
    );

    // A string that is not UTF-8 (field 2, field_manager): the caller's error, naming the
    // field, not the server's INTERNAL.
    let mut bad = prost::Message::encode_to_vec(&request());
    bad.extend_from_slice(&[0x12, 0x02, 0xff, 0xfe]);
    let (code, message) = support::grpc_raw::unary(
        s.addr,
        "/fieldguard.v1.Analysis/PredictConflicts",
        &bad,
        "10S",
    )
    .await;
    assert_eq!(code, Code::InvalidArgument as i32, "{message}");
    assert!(
        message.contains("PredictRequest.field_manager") && message.contains("UTF-8"),
        "{message}"
    );

    // Problems past what fits a trailer: counted, the answer still arrives (not a transport
    // error), and the CLI lists them all locally.
    let mut text = String::new();
    for i in 0..2_000 {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: \"Bad_{i}\"}}\n"
        ));
    }
    let mut r = request();
    r.manifests = vec![pb::Manifest {
        name: "bad.yaml".into(),
        content: text.into_bytes(),
    }];
    let e = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let d = e.get_error_details();
    let info = d.error_info().unwrap();
    let listed: usize = info.metadata["listed"].parse().unwrap();
    let problems: usize = info.metadata["problems"].parse().unwrap();
    assert!(listed < problems, "{listed} of {problems}");
    let last = d.bad_request().unwrap().field_violations.last().unwrap();
    assert!(
        last.description
            .starts_with(&format!("{} more problem(s) not listed", problems - listed)),
        "{last:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_shorter_than_the_work_ends_the_request() {
    let prod = support::example_cluster();
    let cache = cache_of(&prod, "prod").await;
    let mut s = start_with(Stores::single(
        "prod",
        cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
    ))
    .await;
    s.ready.take().unwrap().send(()).unwrap();
    let gate = support::fake_apiserver::Gate::new();
    // Only the prediction's reads of the release's objects (in `shop`) are held.
    prod.state.lock().unwrap().hold_gets = Some(("/namespaces/shop/".into(), gate.clone()));
    let mut r = request();
    r.fresh = true;
    // Sent over plain HTTP/2: a tonic client would also enforce the header's deadline itself
    // and race the server's answer (reporting its own CANCELLED).
    let (code, message) = support::grpc_raw::unary(
        s.addr,
        "/fieldguard.v1.Analysis/PredictConflicts",
        &prost::Message::encode_to_vec(&r),
        "100m",
    )
    .await;
    assert_eq!(code, Code::DeadlineExceeded as i32, "{message}");
    assert!(message.contains("deadline"), "{message}");
    gate.open();
    s.stop().await;
    cache.stop();
}

#[tokio::test]
async fn ownership_queries() {
    let s = start().await;
    let mut o = OwnershipClient::new(s.channel.clone());
    let b = o
        .blame(pb::BlameRequest {
            object: Some(pb::ObjectRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "checkout".into(),
            }),
            path: ".spec.template.spec.containers[name=\"log-shipper\"]".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serde_json::json!(b.resource_version),
        support::example_object("Deployment")["metadata"]["resourceVersion"]
    );
    let image = b
        .lines
        .iter()
        .find(|l| l.text.contains("fluent-bit"))
        .unwrap();
    assert_eq!(
        image.path,
        ".spec.template.spec.containers[name=\"log-shipper\"].image"
    );
    assert_eq!(b.owners[image.owners[0] as usize].manager, "log-injector");
    assert!(b.lines.iter().all(|l| {
        l.path
            .starts_with(".spec.template.spec.containers[name=\"log-shipper\"]")
    }));

    let e = o
        .blame(pb::BlameRequest {
            object: Some(pb::ObjectRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: "shop".into(),
                name: "nope".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);

    let mut st = o
        .who_owns(pb::WhoOwnsRequest {
            path_pattern: r"^\.spec\.replicas$".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut hits = Vec::new();
    while let Some(h) = st.message().await.unwrap() {
        hits.push(h);
    }
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].object.as_ref().unwrap().kind, "Deployment");
    assert_eq!(hits[0].owners[0].manager, "kube-controller-manager");

    let mut st = o
        .managed_by(pb::ManagedByRequest {
            manager: "kubectl-edit".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut objs = Vec::new();
    while let Some(m) = st.message().await.unwrap() {
        objs.push((m.object.unwrap().kind, m.paths));
    }
    objs.sort();
    assert_eq!(
        objs,
        vec![
            (
                "Deployment".to_string(),
                vec![".spec.template.spec.containers[name=\"app\"].image".to_string()]
            ),
            ("Secret".to_string(), vec![".data.password".to_string()]),
        ]
    );

    let m = o
        .managers(pb::ManagersRequest {
            selector: Some(pb::Selector {
                namespace: "shop".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(m.objects, 5);
    let edit = m
        .managers
        .iter()
        .find(|x| x.manager == "kubectl-edit")
        .unwrap();
    assert_eq!(edit.flags[0].kind, "manual-edit");
}

async fn cache_of(
    server: &support::fake_apiserver::FakeApiServer,
    name: &str,
) -> Arc<ClusterCache> {
    support::cache_of(server, name).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_over_watched_clusters_equal_the_snapshot_and_span_clusters() {
    let prod = support::example_cluster();
    let fresh = support::empty_example_cluster();
    let prod_cache = cache_of(&prod, "prod").await;
    let fresh_cache = cache_of(&fresh, "staging").await;
    let stores = Stores {
        by_name: [
            (
                "prod".to_string(),
                prod_cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
            ),
            (
                "staging".to_string(),
                fresh_cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
            ),
        ]
        .into(),
        default: "prod".into(),
        allow_apply: false,
        auth: Arc::new(fieldguard::service::auth::Auth::open()),
        tls: None,
        audit: Default::default(),
        limits: fieldguard::manifest::Limits::REQUESTS,
    };
    let live = start_with(stores).await;
    let snap = start().await;
    let mut a = AnalysisClient::new(live.channel.clone());
    let mut s = AnalysisClient::new(snap.channel.clone());
    let want = s
        .predict_conflicts(request())
        .await
        .unwrap()
        .into_inner()
        .clusters
        .remove(0);

    let mut r = request();
    r.clusters = vec!["prod".into(), "staging".into()];
    let want_objects = want.objects.len();
    let got = a.predict_conflicts(r).await.unwrap().into_inner();
    assert_eq!(got.clusters.len(), 2);
    let strip = |mut c: pb::ClusterPrediction| {
        c.cluster.clear();
        c.source.clear();
        for o in &mut c.objects {
            o.cluster.clear();
        }
        c
    };
    assert_eq!(strip(got.clusters[0].clone()), strip(want.clone()));
    assert!(got.clusters[0].source.contains("prod"));
    let staging = &got.clusters[1];
    assert_eq!(
        staging.summary.unwrap().created,
        6,
        "nothing exists in staging yet"
    );

    // Fresh reads give the same answer (objects fetched from the apiserver first).
    let mut r = request();
    r.fresh = true;
    let got = a.predict_conflicts(r).await.unwrap().into_inner();
    assert_eq!(strip(got.clusters[0].clone()), strip(want));

    // A metadata-only kind's object cannot be read now (a 500 injected on its GET): nothing is
    // predicted from the metadata alone; UNAVAILABLE names the object and the reason.
    prod.state.lock().unwrap().fail_gets_of = Some("/deployments/checkout".into());
    let err = a.predict_conflicts(request()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("live state unavailable")
            && err.message().contains("Deployment.apps shop/checkout")
            && err.message().contains("injected fault"),
        "{}",
        err.message()
    );
    let details = err.get_error_details();
    let info = details.error_info().expect("error info");
    assert_eq!(info.reason, "LIVE_STATE_UNAVAILABLE");
    assert_eq!(info.metadata["objects"], "Deployment.apps shop/checkout");
    // Read fresh, the apiserver's refusal is passed on typed: its status code and reason.
    let mut r = request();
    r.fresh = true;
    let err = a.predict_conflicts(r).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("injected fault"),
        "{}",
        err.message()
    );
    let details = err.get_error_details();
    let info = details.error_info().expect("error info");
    assert_eq!(info.reason, "CLUSTER_UNAVAILABLE");
    assert_eq!(info.metadata["code"], "500");
    assert_eq!(info.metadata["reason"], "InternalError");
    prod.state.lock().unwrap().fail_gets_of = None;
    let got = a.predict_conflicts(request()).await.unwrap().into_inner();
    assert_eq!(got.clusters[0].objects.len(), want_objects);

    // Ownership answers come from the watch-fed index.
    let mut o = OwnershipClient::new(live.channel.clone());
    let m = o
        .managers(pb::ManagersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(
        m.managers
            .iter()
            .any(|x| x.manager == "kubectl-edit" && x.objects == 2)
    );
    // ManagedBy over the cache's manager index.
    let mut st = o
        .managed_by(pb::ManagedByRequest {
            manager: "kubectl-edit".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut kinds = Vec::new();
    while let Some(m) = st.message().await.unwrap() {
        assert!(!m.resource_version.is_empty());
        kinds.push(m.object.unwrap().kind);
    }
    kinds.sort();
    assert_eq!(kinds, ["Deployment", "Secret"]);
    // A change in the cluster reaches the cache.
    {
        let mut st = prod.state.lock().unwrap();
        st.delete(&(
            "apps".into(),
            "deployments".into(),
            "shop".into(),
            "checkout".into(),
        ));
    }
    let mut gone = false;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < until {
        let m = o
            .managers(pb::ManagersRequest::default())
            .await
            .unwrap()
            .into_inner();
        if m.managers
            .iter()
            .any(|x| x.manager == "kubectl-edit" && x.objects == 1)
        {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(gone, "the watch delivered the delete");
    assert!(prod.requests().iter().all(|r| r.starts_with("GET ")));
    prod_cache.stop();
    fresh_cache.stop();
}

/// Protocol only: the fake apiserver merges with fieldguard's own engine (release records are
/// Secrets, which the real apiserver does not serve).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_apply_streams_progress_then_the_result() {
    use pb::releases_client::ReleasesClient;
    let fresh = support::empty_example_cluster();
    let cache = cache_of(&fresh, "staging").await;
    let manifest = pb::Manifest {
        name: "release.yaml".into(),
        content:
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: blue}\n"
                .to_vec(),
    };
    let request = pb::ApplyRequest {
        release: "shop".into(),
        namespace: "shop".into(),
        manifests: vec![manifest],
        ..Default::default()
    };
    // Alice may read and write ConfigMaps and release records in `shop`, nothing else.
    {
        let mut st = fresh.state.lock().unwrap();
        st.tokens.insert(
            "alice-token".into(),
            (
                "alice".into(),
                vec!["devs".into()],
                vec!["fieldguard".into()],
                false,
            ),
        );
        for resource in ["configmaps", "secrets"] {
            st.grants
                .push(("alice".into(), "*".into(), resource.into(), "shop".into()));
        }
        // She may read everything in shop; write nothing else.
        for verb in ["get", "list"] {
            st.grants
                .push(("alice".into(), verb.into(), "*".into(), "shop".into()));
        }
    }
    let audit_file =
        std::env::temp_dir().join(format!("fieldguard-audit-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&audit_file);
    let store = cache.clone() as Arc<dyn fieldguard::live::state::LiveState>;

    // Off unless asked for.
    let mut stores = secured(Stores::single("staging", store.clone()), &fresh, false).await;
    stores.audit = Arc::new(fieldguard::service::releases::AuditLog::to_file(&audit_file).unwrap());
    let running = start_with(stores.clone()).await;
    let err = ReleasesClient::new(running.channel.clone())
        .apply(authorized(
            tonic::Request::new(request.clone()),
            "alice-token",
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    running.stop().await;

    // An open service (no authentication configured) never applies.
    let mut open = Stores::single("staging", store.clone());
    open.allow_apply = true;
    let running = start_with(open).await;
    let err = ReleasesClient::new(running.channel.clone())
        .apply(request.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    assert!(err.message().contains("authenticate"), "{}", err.message());
    running.stop().await;

    stores.allow_apply = true;
    let running = start_with(stores).await;
    // Without credentials: refused.
    let err = ReleasesClient::new(running.channel.clone())
        .apply(request.clone())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated);
    let mut events = ReleasesClient::new(running.channel.clone())
        .apply(authorized(
            tonic::Request::new(request.clone()),
            "alice-token",
        ))
        .await
        .unwrap()
        .into_inner();
    let mut progress = Vec::new();
    let mut result = None;
    while let Some(ev) = events.message().await.unwrap() {
        match ev.event.unwrap() {
            pb::apply_event::Event::Progress(p) => progress.push(p),
            pb::apply_event::Event::Result(r) => result = Some(r),
        }
    }
    let r = result.expect("a result");
    assert_eq!(
        (r.revision, r.method.as_str(), r.status.as_str()),
        (1, "ssa", "deployed")
    );
    assert_eq!(r.objects[0].result, "created");
    assert_eq!(r.prediction[0].verdict, pb::Verdict::Created as i32);
    assert!(
        progress.iter().any(|p| p.contains("settings: created")),
        "{progress:?}"
    );
    // Every request of the apply was made as alice.
    let writes: Vec<String> = fresh
        .requests()
        .into_iter()
        .filter(|q| q.contains("/namespaces/shop/"))
        .collect();
    assert!(
        writes
            .iter()
            .any(|q| q == "PATCH /api/v1/namespaces/shop/configmaps/settings as alice"),
        "{writes:?}"
    );
    assert!(
        writes.iter().all(|q| q.ends_with(" as alice")),
        "{writes:?}"
    );
    let audit = std::fs::read_to_string(&audit_file).unwrap();
    let entry: serde_json::Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(entry["user"], "alice");
    assert_eq!(entry["method"], "ssa");
    assert_eq!(entry["status"], "deployed");
    assert_eq!(entry["objects"][0]["result"], "created");

    // Alice cannot write Deployments: the apiserver refuses the impersonated request.
    let deploy = pb::Manifest {
        name: "checkout.yaml".into(),
        content: std::fs::read(root().join("examples/release/checkout.yaml")).unwrap(),
    };
    let other = pb::ApplyRequest {
        release: "checkout".into(),
        manifests: vec![deploy],
        ..request.clone()
    };
    let mut events = ReleasesClient::new(running.channel.clone())
        .apply(authorized(tonic::Request::new(other), "alice-token"))
        .await
        .unwrap()
        .into_inner();
    let refusal = loop {
        match events.message().await {
            Ok(Some(pb::ApplyEvent {
                event: Some(pb::apply_event::Event::Result(r)),
            })) => break format!("{r:?}"),
            Ok(Some(_)) => continue,
            Ok(None) => break String::new(),
            Err(e) => break e.message().to_string(),
        }
    };
    assert!(refusal.contains("failed"), "{refusal}");
    assert!(refusal.contains("cannot patch"), "{refusal}");
    assert!(
        fresh.requests().iter().any(|q| q.starts_with("PATCH ")
            && !q.contains("/configmaps/")
            && !q.contains("/secrets/")
            && q.ends_with(" as alice")),
        "the write was attempted as alice"
    );
    assert!(
        !fresh
            .state
            .lock()
            .unwrap()
            .objects
            .keys()
            .any(|k| k.1 == "deployments" || k.1 == "services"),
        "and refused by the apiserver"
    );

    // An object of another release is refused, nothing written.
    let theirs = pb::ApplyRequest {
        release: "other".into(),
        adopt: true,
        ..request
    };
    let err = ReleasesClient::new(running.channel.clone())
        .apply(authorized(tonic::Request::new(theirs), "alice-token"))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(
        err.message().contains("belongs to release"),
        "{}",
        err.message()
    );

    // Uninstall, planned (nothing written), then done: the object and the records go, as alice.
    let uninstall = |plan: bool| pb::UninstallRequest {
        release: "shop".into(),
        namespace: "shop".into(),
        plan,
        ..Default::default()
    };
    let result_of = |mut events: tonic::Streaming<pb::ApplyEvent>| async move {
        let mut result = None;
        while let Some(ev) = events.message().await.unwrap() {
            if let Some(pb::apply_event::Event::Result(r)) = ev.event {
                result = Some(r);
            }
        }
        result.expect("a result")
    };
    let writes_before = fresh
        .requests()
        .iter()
        .filter(|q| !q.starts_with("GET "))
        .count();
    let planned = result_of(
        ReleasesClient::new(running.channel.clone())
            .uninstall(authorized(
                tonic::Request::new(uninstall(true)),
                "alice-token",
            ))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert_eq!(
        (planned.operation.as_str(), planned.status.as_str()),
        ("uninstall", "planned")
    );
    assert_eq!(planned.objects[0].message, "would be deleted");
    assert_eq!(
        fresh
            .requests()
            .iter()
            .filter(|q| !q.starts_with("GET "))
            .count(),
        writes_before
    );
    let done = result_of(
        ReleasesClient::new(running.channel.clone())
            .uninstall(authorized(
                tonic::Request::new(uninstall(false)),
                "alice-token",
            ))
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert_eq!(done.status, "uninstalled", "{done:?}");
    assert_eq!(
        (
            done.objects[0].object.as_str(),
            done.objects[0].result.as_str()
        ),
        ("ConfigMap shop/settings", "deleted")
    );
    let left: Vec<String> = fresh
        .state
        .lock()
        .unwrap()
        .objects
        .keys()
        .filter(|k| k.3 == "settings" || k.3.starts_with("fieldguard.release.v1.shop."))
        .map(|k| k.3.clone())
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        fresh
            .requests()
            .iter()
            .any(|q| q == "DELETE /api/v1/namespaces/shop/configmaps/settings as alice"),
        "deleted as alice"
    );
    let audit = std::fs::read_to_string(&audit_file).unwrap();
    let last: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(
        (last["operation"].as_str(), last["status"].as_str()),
        (Some("uninstall"), Some("uninstalled"))
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_requests_in_flight() {
    let prod = support::example_cluster();
    let cache = cache_of(&prod, "prod").await;
    let mut running = start_with(Stores::single(
        "prod",
        cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
    ))
    .await;
    running.ready.take().unwrap().send(()).unwrap();
    // GETs are held at a gate: a fresh prediction is in flight (it has asked the apiserver)
    // when the stop comes, and can only finish after it.
    let gate = support::fake_apiserver::Gate::new();
    // Only the prediction's reads of the release's objects (in `shop`) are held.
    prod.state.lock().unwrap().hold_gets = Some(("/namespaces/shop/".into(), gate.clone()));
    let mut r = request();
    r.fresh = true;
    let mut client = AnalysisClient::new(running.channel.clone());
    let in_flight = tokio::spawn(async move { client.predict_conflicts(r).await });
    gate.arrived(1).await;
    running.stop.take().unwrap().send(()).unwrap();
    // The server takes the stop first; only then may the held request finish.
    running.stopping.take().unwrap().await.unwrap();
    gate.open();
    tokio::time::timeout(std::time::Duration::from_secs(60), running.stop())
        .await
        .expect("the service drains and stops");
    let answer = in_flight.await.unwrap();
    assert!(
        answer.is_ok(),
        "the request in flight completes: {answer:?}"
    );
    assert!(!answer.unwrap().into_inner().clusters[0].objects.is_empty());
    cache.stop();
}

/// Token-review authentication over the fake cluster (audience `fieldguard`).
async fn secured(
    mut stores: Stores,
    server: &support::fake_apiserver::FakeApiServer,
    anonymous: bool,
) -> Stores {
    use fieldguard::service::auth::{Auth, AuthConfig};
    let api = server.api("shop").await;
    stores.auth = Arc::new(Auth::new(
        AuthConfig {
            token_review: true,
            audiences: vec!["fieldguard".into()],
            mtls: false,
            anonymous,
            ..Default::default()
        },
        Some(api),
    ));
    stores
}

fn authorized<T>(mut req: tonic::Request<T>, token: &str) -> tonic::Request<T> {
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_modes_and_read_authorization() {
    let prod = support::example_cluster();
    {
        let mut st = prod.state.lock().unwrap();
        let aud = vec!["fieldguard".to_string()];
        st.tokens.insert(
            "alice-token".into(),
            ("alice".into(), vec![], aud.clone(), false),
        );
        st.tokens
            .insert("old-token".into(), ("alice".into(), vec![], aud, true));
        st.tokens.insert(
            "other-audience".into(),
            ("alice".into(), vec![], vec!["kubernetes".into()], false),
        );
        st.grants.push((
            "alice".into(),
            "get".into(),
            "services".into(),
            "shop".into(),
        ));
        st.grants.push((
            "system:unauthenticated".into(),
            "get".into(),
            "horizontalpodautoscalers".into(),
            "shop".into(),
        ));
    }
    let cache = cache_of(&prod, "prod").await;
    let store = cache.clone() as Arc<dyn fieldguard::live::state::LiveState>;
    let stores = secured(Stores::single("prod", store.clone()), &prod, false).await;
    let mut running = start_with(stores).await;
    running.ready.take().unwrap().send(()).unwrap();
    let mut own = OwnershipClient::new(running.channel.clone());
    let managers = || pb::ManagersRequest {
        selector: Some(pb::Selector {
            namespace: "shop".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Credentials are required; rejected and expired tokens are refused, never echoed.
    let e = own.managers(managers()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    for (token, why) in [
        ("not-a-token", "invalid"),
        ("old-token", "expired"),
        ("other-audience", "audiences"),
    ] {
        let e = own
            .managers(authorized(tonic::Request::new(managers()), token))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{token}");
        assert!(e.message().contains(why), "{token}: {}", e.message());
        assert!(!e.message().contains(token), "the token is never echoed");
    }
    // Alice may get Services in shop, nothing else.
    let blame = |kind: &str, api_version: &str, name: &str| pb::BlameRequest {
        object: Some(pb::ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: "shop".into(),
            name: name.into(),
        }),
        ..Default::default()
    };
    let svc = own
        .blame(authorized(
            tonic::Request::new(blame("Service", "v1", "checkout")),
            "alice-token",
        ))
        .await;
    assert!(svc.is_ok(), "{svc:?}");
    let e = own
        .blame(authorized(
            tonic::Request::new(blame("Deployment", "apps/v1", "checkout")),
            "alice-token",
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let m = own
        .managers(authorized(tonic::Request::new(managers()), "alice-token"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(m.objects, 1, "only the Service is counted");
    let e = AnalysisClient::new(running.channel.clone())
        .predict_conflicts(authorized(tonic::Request::new(request()), "alice-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().contains("Deployment.apps shop/checkout"),
        "{}",
        e.message()
    );
    running.stop().await;

    // Anonymous access, when enabled, reads what system:anonymous may read.
    let stores = secured(Stores::single("prod", store), &prod, true).await;
    let mut running = start_with(stores).await;
    running.ready.take().unwrap().send(()).unwrap();
    let mut own = OwnershipClient::new(running.channel.clone());
    let m = own.managers(managers()).await.unwrap().into_inner();
    assert_eq!(m.objects, 1, "only the HorizontalPodAutoscaler");
    let e = own
        .blame(blame("Service", "v1", "checkout"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    running.stop().await;
    cache.stop();
}

/// A flood of unknown bearer tokens: each peer (address) may cause a burst of TokenReviews,
/// then is refused with RESOURCE_EXHAUSTED without one; other peers are served; the token
/// cache keeps at most its configured number of answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_tokens_is_bounded_per_peer_and_in_memory() {
    use fieldguard::service::auth::{Auth, AuthConfig};
    let prod = support::example_cluster();
    prod.state.lock().unwrap().tokens.insert(
        "alice-token".into(),
        ("alice".into(), vec![], vec![], false),
    );
    let cache = cache_of(&prod, "prod").await;
    let store = cache.clone() as Arc<dyn fieldguard::live::state::LiveState>;
    let reviews = || {
        prod.requests()
            .iter()
            .filter(|r| r.contains("tokenreviews"))
            .count()
    };
    let auth = |burst: f64, entries: u64, api| {
        Arc::new(Auth::new(
            AuthConfig {
                token_review: true,
                cache_entries: entries,
                review_burst: burst,
                // No refill: the counts below do not depend on time.
                reviews_per_second: 0.0,
                ..Default::default()
            },
            Some(api),
        ))
    };
    let managers =
        |token: &str| authorized(tonic::Request::new(pb::ManagersRequest::default()), token);

    let a = auth(10.0, 64, prod.api("shop").await);
    let mut stores = Stores::single("prod", store.clone());
    stores.auth = a.clone();
    let mut running = start_with(stores).await;
    running.ready.take().unwrap().send(()).unwrap();
    let mut own = OwnershipClient::new(running.channel.clone());
    let before = reviews();
    let mut codes = std::collections::BTreeMap::new();
    for i in 0..300 {
        let e = own
            .managers(managers(&format!("random-{i}")))
            .await
            .unwrap_err();
        *codes.entry(format!("{:?}", e.code())).or_insert(0) += 1;
    }
    assert_eq!(
        codes,
        [
            ("ResourceExhausted".to_string(), 290),
            ("Unauthenticated".to_string(), 10)
        ]
        .into()
    );
    assert_eq!(
        reviews() - before,
        10,
        "one review per token within the burst, then none"
    );
    // A token already reviewed costs nothing: still answered from the cache.
    let e = own.managers(managers("random-3")).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert_eq!(reviews() - before, 10);
    // Another address has its own budget: alice is served.
    let other = tonic::transport::Endpoint::from_shared(format!("http://{}", running.addr))
        .unwrap()
        .local_address(Some("127.0.0.2".parse().unwrap()))
        .connect()
        .await
        .unwrap();
    let ok = OwnershipClient::new(other)
        .managers(managers("alice-token"))
        .await;
    assert!(ok.is_ok(), "{ok:?}");
    running.stop().await;

    // The cache holds at most its bound, however many tokens arrive.
    let a = auth(1e9, 64, prod.api("shop").await);
    let mut stores = Stores::single("prod", store);
    stores.auth = a.clone();
    let mut running = start_with(stores).await;
    running.ready.take().unwrap().send(()).unwrap();
    let mut own = OwnershipClient::new(running.channel.clone());
    for i in 0..300 {
        let _ = own.managers(managers(&format!("many-{i}"))).await;
    }
    let (tokens, _) = a.cached().await;
    assert!(tokens <= 64, "{tokens} cached token answers");
    running.stop().await;
    cache.stop();
}

/// A CA, a server certificate for localhost and client certificates (CN user, O groups).
struct Pki {
    ca: String,
    server: (String, String),
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Pki {
    fn new() -> Pki {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "fieldguard test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap();
        let issuer = rcgen::Issuer::new(params, key);
        let server_key = rcgen::KeyPair::generate().unwrap();
        let server = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&server_key, &issuer)
            .unwrap();
        Pki {
            ca: ca.pem(),
            server: (server.pem(), server_key.serialize_pem()),
            issuer,
        }
    }

    fn client(&self, user: &str, groups: &[&str]) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, user);
        for g in groups {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *g);
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_identifies_callers_by_certificate() {
    use fieldguard::service::auth::{Auth, AuthConfig};
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};
    let prod = support::example_cluster();
    prod.state.lock().unwrap().grants.push((
        "ops".into(),
        "get".into(),
        "services".into(),
        "shop".into(),
    ));
    let cache = cache_of(&prod, "prod").await;
    let pki = Pki::new();
    let mut stores = Stores::single(
        "prod",
        cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
    );
    stores.tls = Some(
        ServerTlsConfig::new()
            .identity(Identity::from_pem(&pki.server.0, &pki.server.1))
            .client_ca_root(Certificate::from_pem(&pki.ca)),
    );
    stores.auth = Arc::new(Auth::new(
        AuthConfig {
            mtls: true,
            cache_ttl: std::time::Duration::from_secs(30),
            ..Default::default()
        },
        Some(prod.api("shop").await),
    ));
    let running = start_with_tls(stores).await;
    let connect = |identity: Option<(String, String)>| {
        let ca = pki.ca.clone();
        let addr = running.addr;
        async move {
            let mut tls = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca))
                .domain_name("localhost");
            if let Some((c, k)) = identity {
                tls = tls.identity(Identity::from_pem(c, k));
            }
            Endpoint::from_shared(format!("https://{addr}"))
                .unwrap()
                .tls_config(tls)
                .unwrap()
                .connect()
                .await
        }
    };
    let blame = |kind: &str, api_version: &str| pb::BlameRequest {
        object: Some(pb::ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: "shop".into(),
            name: "checkout".into(),
        }),
        ..Default::default()
    };
    // bob (group ops) may get Services in shop.
    let channel = connect(Some(pki.client("bob", &["ops"]))).await.unwrap();
    let mut own = OwnershipClient::new(channel);
    assert!(own.blame(blame("Service", "v1")).await.is_ok());
    let e = own.blame(blame("Deployment", "apps/v1")).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().starts_with("bob may not get"),
        "{}",
        e.message()
    );
    // carol is not in ops.
    let channel = connect(Some(pki.client("carol", &["dev"]))).await.unwrap();
    let e = OwnershipClient::new(channel)
        .blame(blame("Service", "v1"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    // Without a certificate, or with one from another CA, the handshake fails.
    let refused = match connect(None).await {
        Err(_) => true,
        Ok(ch) => OwnershipClient::new(ch)
            .blame(blame("Service", "v1"))
            .await
            .is_err(),
    };
    assert!(refused, "a client without a certificate is refused");
    let stranger = Pki::new().client("mallory", &["ops"]);
    let refused = match connect(Some(stranger)).await {
        Err(_) => true,
        Ok(ch) => OwnershipClient::new(ch)
            .blame(blame("Service", "v1"))
            .await
            .is_err(),
    };
    assert!(refused, "a certificate from another CA is refused");
    running.stop().await;
    cache.stop();
}

async fn start_with_tls(stores: Stores) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let done = tokio::spawn(async move {
        service::serve_on(listener, stores, async {}, async {
            let _ = stop_rx.await;
            let _ = stopping_tx.send(());
        })
        .await
        .unwrap();
    });
    // A plaintext channel is never used against a TLS server; it only fills the struct.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    Running {
        channel,
        addr,
        ready: None,
        stop: Some(stop_tx),
        stopping: Some(stopping_rx),
        done,
    }
}

/// Reads are authorized against the resource discovery names for the kind — also for kinds
/// the cache does not watch — never a plural guessed from the kind (`policys`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_asks_about_the_served_resource() {
    use support::fake_apiserver::{FakeApiServer, Resource, State};
    let mut resources = support::example_resources();
    resources.push(Resource::new(
        "example.com/v1",
        "Policy",
        "policies",
        true,
        &[],
    ));
    let mut st = State::new(resources);
    st.seed(
        serde_json::json!({"apiVersion": "example.com/v1", "kind": "Policy",
        "metadata": {"name": "p1", "namespace": "shop"}, "spec": {"x": 1}}),
    );
    st.tokens.insert(
        "alice-token".into(),
        ("alice".into(), vec![], vec!["fieldguard".into()], false),
    );
    st.grants.push((
        "alice".into(),
        "get".into(),
        "policies".into(),
        "shop".into(),
    ));
    let server = FakeApiServer::start(st);
    let config = fieldguard::cache::CacheConfig {
        exclude_kinds: vec!["Event".into(), "Policy".into()],
        ..Default::default()
    };
    let cache = ClusterCache::start("prod", server.api("shop").await, config)
        .await
        .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), cache.wait_synced())
        .await
        .unwrap();
    let stores = secured(
        Stores::single(
            "prod",
            cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
        ),
        &server,
        false,
    )
    .await;
    let mut running = start_with(stores).await;
    running.ready.take().unwrap().send(()).unwrap();
    let mut own = OwnershipClient::new(running.channel.clone());
    let req = pb::BlameRequest {
        object: Some(pb::ObjectRef {
            api_version: "example.com/v1".into(),
            kind: "Policy".into(),
            namespace: "shop".into(),
            name: "p1".into(),
        }),
        ..Default::default()
    };
    let r = own
        .blame(authorized(tonic::Request::new(req), "alice-token"))
        .await;
    if let Err(e) = &r {
        assert_ne!(e.code(), Code::PermissionDenied, "{e:?}");
    }
    let sars: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.contains("subjectaccessreviews"))
        .collect();
    assert!(!sars.is_empty());
    running.stop().await;
    cache.stop();
}
