//! Traces reach a collector: an OTLP/gRPC trace receiver (the collector's own protocol, from
//! `opentelemetry-proto`) runs in the test; the service exports to it the spans of a
//! prediction and of a release apply, with their attributes, and no Secret value in any span.
//!
//! The tracing subscriber is process-wide: this binary has this one test only. The apply
//! runs against the fake apiserver (a core Secret): protocol only.

mod support;

use fieldguard::service::Stores;
use fieldguard::service::proto::{
    self as pb, analysis_client::AnalysisClient, releases_client::ReleasesClient,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECRET: &str = "otlp-never-exported-6e1b";

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Received spans by name: the attributes (as text) of each.
type Spans = BTreeMap<String, Vec<BTreeMap<String, String>>>;

/// Every received span, and the service names.
fn spans(r: &Receiver) -> (Spans, Vec<String>) {
    let mut out = Spans::new();
    let mut services = Vec::new();
    for req in r.0.lock().unwrap().iter() {
        for rs in &req.resource_spans {
            for a in rs.resource.iter().flat_map(|r| &r.attributes) {
                if a.key == "service.name" {
                    services.push(text(a.value.as_ref().and_then(|v| v.value.as_ref())));
                }
            }
            for s in rs.scope_spans.iter().flat_map(|s| &s.spans) {
                let attrs = s
                    .attributes
                    .iter()
                    .map(|a| {
                        (
                            a.key.clone(),
                            text(a.value.as_ref().and_then(|v| v.value.as_ref())),
                        )
                    })
                    .collect();
                out.entry(s.name.clone()).or_default().push(attrs);
            }
        }
    }
    (out, services)
}

fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_of_a_prediction_and_an_apply_reach_an_otlp_collector() {
    use fieldguard::service::auth::{Auth, AuthConfig};
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = listener.local_addr().unwrap();
    let r = receiver.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(r))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    let guard = fieldguard::telemetry::init(
        fieldguard::telemetry::LogFormat::Text,
        "info",
        Some(&format!("http://{collector}")),
    );

    let server = support::example_cluster();
    {
        let mut st = server.state.lock().unwrap();
        st.tokens
            .insert("ops-token".into(), ("ops".into(), vec![], vec![], false));
        st.grants
            .push(("ops".into(), "*".into(), "*".into(), String::new()));
    }
    let cache = support::cache_of(&server, "prod").await;
    let mut stores = Stores::single(
        "prod",
        cache.clone() as Arc<dyn fieldguard::live::state::LiveState>,
    );
    stores.allow_apply = true;
    stores.auth = Arc::new(Auth::new(
        AuthConfig {
            token_review: true,
            ..Default::default()
        },
        Some(server.api("shop").await),
    ));
    let channel = support::serve(stores).await;
    fn auth<T>(mut r: tonic::Request<T>) -> tonic::Request<T> {
        r.metadata_mut()
            .insert("authorization", "Bearer ops-token".parse().unwrap());
        r
    }
    let manifests = vec![pb::Manifest {
        name: "secret.yaml".into(),
        content: format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: checkout-db\n  namespace: shop\ntype: Opaque\nstringData:\n  password: {SECRET}\n"
        )
        .into_bytes(),
    }];
    AnalysisClient::new(channel.clone())
        .predict_conflicts(auth(tonic::Request::new(pb::PredictRequest {
            field_manager: "helm".into(),
            manifests: manifests.clone(),
            default_namespace: "shop".into(),
            ..Default::default()
        })))
        .await
        .unwrap();
    let mut events = ReleasesClient::new(channel.clone())
        .apply(auth(tonic::Request::new(pb::ApplyRequest {
            release: "checkout".into(),
            namespace: "shop".into(),
            manifests,
            adopt: true,
            force: Some(pb::ForcePolicy {
                mode: pb::ForceMode::All as i32,
                against: vec![],
            }),
            ..Default::default()
        })))
        .await
        .unwrap()
        .into_inner();
    while events.message().await.unwrap().is_some() {}

    // Shutting the exporter down flushes every finished span (off the runtime's workers: it
    // waits for the export).
    tokio::task::spawn_blocking(move || drop(guard))
        .await
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (got, _) = spans(&receiver);
        if ["PredictConflicts", "predict_on_cluster", "release"]
            .iter()
            .all(|n| got.contains_key(*n))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "spans received: {:?}",
            got.keys().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (got, services) = spans(&receiver);
    assert!(services.iter().all(|s| s == "fieldguard"), "{services:?}");
    let on_cluster = &got["predict_on_cluster"][0];
    assert!(on_cluster["cluster"].contains("prod"), "{on_cluster:?}");
    assert_eq!(on_cluster["manifests"], "1");
    let release = &got["release"][0];
    assert_eq!(release["release"], "checkout");
    assert_eq!(release["namespace"], "shop");
    // No Secret value in any span, attribute or event, plain or base64.
    let everything = format!("{:?}", receiver.0.lock().unwrap());
    use base64::Engine;
    for s in [
        SECRET.to_string(),
        base64::engine::general_purpose::STANDARD.encode(SECRET),
    ] {
        assert!(!everything.contains(&s), "a Secret value was exported");
    }
    cache.stop();
}
