//! Test support shared by integration tests.
#![allow(dead_code)]

pub mod fake_apiserver;
pub mod fake_writes;
pub mod grpc_raw;
pub mod helm4;
pub mod judge;
pub mod kubeapi;
pub mod process;
pub mod proxy;
pub mod realapi;
pub mod reports;

use fake_apiserver::{FakeApiServer, Resource, State, crd_openapi, openapi_fixture};
use fieldguard::live::snapshot::Snapshot;
use fieldguard::manifest::Input;
use serde_json::Value;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A random test's seed: the environment variable `var`, else the clock (the test prints it).
pub fn seed(var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        })
}

/// A random test's step count: the environment variable `var`, else 2,000.
pub fn steps(var: &str) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// A random pick from a small domain (so that random writers meet on the same fields).
pub fn pick<'a, T>(rng: &mut rand::rngs::StdRng, xs: &'a [T]) -> &'a T {
    use rand::Rng;
    &xs[rng.gen_range(0..xs.len())]
}

/// The resource types of the bundled example.
pub fn example_resources() -> Vec<Resource> {
    vec![
        Resource::new("v1", "Namespace", "namespaces", false, &["status"]),
        Resource::new("v1", "Secret", "secrets", true, &[]),
        Resource::new("v1", "ConfigMap", "configmaps", true, &[]),
        Resource::new("v1", "Service", "services", true, &["status"]),
        Resource::new("batch/v1", "Job", "jobs", true, &["status"]),
        Resource::new(
            "apps/v1",
            "Deployment",
            "deployments",
            true,
            &["status", "scale"],
        ),
        Resource::new(
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &["status"],
        ),
        Resource::new(
            "cert-manager.io/v1",
            "Certificate",
            "certificates",
            true,
            &["status"],
        ),
        Resource::new(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["status"],
        ),
    ]
}

/// The example's published schemas, the CRD's built as kube-apiserver publishes them.
fn add_example_schemas(st: &mut State, crd: &Value) {
    let core = openapi_fixture("v1.36.5/api__v1_openapi.json");
    st.openapi.insert(
        "apis/cert-manager.io/v1".into(),
        crd_openapi(crd, "v1", &core),
    );
    st.openapi.insert("api/v1".into(), core);
    st.openapi.insert(
        "apis/apps/v1".into(),
        openapi_fixture("v1.36.5/apis__apps__v1_openapi.json"),
    );
    st.openapi.insert(
        "apis/autoscaling/v2".into(),
        openapi_fixture("v1.36.5/apis__autoscaling__v2_openapi.json"),
    );
}

/// A fake cluster serving the example snapshot's objects, CRD and schemas.
pub fn example_cluster() -> FakeApiServer {
    let snap = Snapshot::load(
        &[Input::Path(root().join("examples/cluster"))],
        &mut std::io::empty(),
    )
    .unwrap();
    let mut st = State::new(example_resources());
    let mut crd = None;
    for (_, d) in snap.objects() {
        let text = fieldguard::value::json::to_string(
            &d.value().unwrap(),
            fieldguard::value::json::Style::PLAIN,
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        if v["kind"] == "CustomResourceDefinition" {
            crd = Some(v.clone());
        }
        st.seed(v);
    }
    add_example_schemas(&mut st, &crd.unwrap());
    FakeApiServer::start(st)
}

/// The same types, no objects but the CRD (a fresh cluster).
pub fn empty_example_cluster() -> FakeApiServer {
    empty_example_cluster_with(vec![])
}

/// [`empty_example_cluster`] serving more types (`extra`).
#[allow(dead_code)]
pub fn empty_example_cluster_with(extra: Vec<Resource>) -> FakeApiServer {
    let snap = Snapshot::load(
        &[Input::Path(root().join("examples/cluster/crds"))],
        &mut std::io::empty(),
    )
    .unwrap();
    let mut st = State::new(example_resources().into_iter().chain(extra).collect());
    let (_, d) = snap.objects().next().unwrap();
    let text = fieldguard::value::json::to_string(
        &d.value().unwrap(),
        fieldguard::value::json::Style::PLAIN,
    );
    let crd: Value = serde_json::from_str(&text).unwrap();
    st.seed(crd.clone());
    add_example_schemas(&mut st, &crd);
    FakeApiServer::start(st)
}

/// A cache of `server`'s objects under `name`, synced.
pub async fn cache_of(
    server: &FakeApiServer,
    name: &str,
) -> std::sync::Arc<fieldguard::cache::ClusterCache> {
    let cache = fieldguard::cache::ClusterCache::start(
        name,
        server.api("shop").await,
        fieldguard::cache::CacheConfig::default(),
    )
    .await
    .unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(60), cache.wait_synced())
        .await
        .unwrap();
    cache
}

/// Serves `stores` on a loopback port (ready at once, stopped with the runtime) and returns a
/// channel to it.
pub async fn serve(stores: fieldguard::service::Stores) -> tonic::transport::Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(fieldguard::service::serve_on(
        listener,
        stores,
        async {},
        std::future::pending(),
    ));
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The bundled example snapshot's objects (`examples/cluster/shop.yaml`, exported from a real
/// kube-apiserver by `examples/cluster/generate.sh`: its resourceVersions and times change
/// with each export), as JSON.
pub fn example_objects() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(root().join("examples/cluster/shop.yaml")).unwrap();
    let list = fieldguard::value::yaml::parse_one(&text).unwrap();
    judge::to_json(&list)["items"].as_array().unwrap().clone()
}

/// The example's object of `kind`.
pub fn example_object(kind: &str) -> serde_json::Value {
    example_objects()
        .into_iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in the example"))
}

/// The newest time of `manager`'s entries in the example.
pub fn example_newest(manager: &str) -> String {
    example_objects()
        .iter()
        .flat_map(|o| {
            o["metadata"]["managedFields"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|e| e["manager"] == manager)
        .filter_map(|e| e["time"].as_str().map(String::from))
        .max()
        .unwrap()
}
