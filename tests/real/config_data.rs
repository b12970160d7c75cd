//! The data of Secrets and ConfigMaps judged by kube-apiserver itself: each case is created on
//! the server, and fieldguard's refusal (`validation::config_data`, what `check` reports before
//! anything is sent) must equal the server's answer — refused or not, and the 422's causes
//! word for word (field, reason, message, as a set).

use crate::support;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use support::kubeapi::shared_server;
use support::realapi::write;

const NAMESPACE: &str = "config-data";
const MIB: usize = 1024 * 1024;

/// Cases: a name, the kind, and its bags.
fn cases() -> Vec<(&'static str, &'static str, Value)> {
    let b64 = |n: usize| {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(vec![b'x'; n])
    };
    let x = |n: usize| "x".repeat(n);
    vec![
        (
            "good keys",
            "Secret",
            json!({"stringData": {"a": "1", "B_2": "2", ".dot": "3", "a-b.c": "4"}}),
        ),
        (
            "bad key in stringData",
            "Secret",
            json!({"stringData": {"bad key!": "v"}}),
        ),
        (
            "bad key in data",
            "Secret",
            json!({"data": {"b*d": b64(3)}}),
        ),
        (
            "dot keys",
            "Secret",
            json!({"stringData": {".": "1", "..": "2", "..x": "3"}}),
        ),
        ("long key", "Secret", json!({"stringData": {x(254): "v"}})),
        ("key of 253", "Secret", json!({"stringData": {x(253): "v"}})),
        (
            "secret at the bound",
            "Secret",
            json!({"stringData": {"a": x(MIB - 3)}, "data": {"b": b64(3)}}),
        ),
        (
            "secret over the bound",
            "Secret",
            json!({"stringData": {"a": x(MIB - 2)}, "data": {"b": b64(3)}}),
        ),
        (
            "stringData replaces data",
            "Secret",
            json!({"stringData": {"a": x(MIB)}, "data": {"a": b64(6)}}),
        ),
        (
            "config map good",
            "ConfigMap",
            json!({"data": {"k": "v"}, "binaryData": {"b": b64(2)}}),
        ),
        (
            "config map bad keys",
            "ConfigMap",
            json!({"data": {"bad key": "v"}, "binaryData": {"..b": b64(2)}}),
        ),
        (
            "config map duplicate",
            "ConfigMap",
            json!({"data": {"k": "v"}, "binaryData": {"k": b64(2)}}),
        ),
        (
            "config map at the bound",
            "ConfigMap",
            json!({"data": {"k": x(MIB - 3)}, "binaryData": {"b": b64(3)}}),
        ),
        (
            "config map over the bound",
            "ConfigMap",
            json!({"data": {"k": x(MIB - 2)}, "binaryData": {"b": b64(3)}}),
        ),
    ]
}

type Causes = BTreeSet<(String, String, String)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_and_config_map_data_refused_as_the_server_refuses_it() {
    let Some(server) = shared_server(module_path!()) else {
        return;
    };
    let api = server.api().await;
    support::realapi::create_namespace(&api, NAMESPACE).await;
    let mut disagreements = Vec::new();
    for (i, (name, kind, bags)) in cases().into_iter().enumerate() {
        let mut obj = json!({
            "apiVersion": "v1",
            "kind": kind,
            "metadata": {"name": format!("case-{i}"), "namespace": NAMESPACE},
        });
        for (k, v) in bags.as_object().unwrap() {
            obj[k] = v.clone();
        }
        let plural = if kind == "Secret" {
            "secrets"
        } else {
            "configmaps"
        };
        let url = format!("/api/v1/namespaces/{NAMESPACE}/{plural}");
        let server_says: Option<Causes> =
            match write(&api, http::Method::POST, &url, "application/json", &obj).await {
                Ok(_) => None,
                Err(r) => {
                    assert_eq!(r.code, 422, "{name}: {r:?}");
                    Some(r.causes.into_iter().collect())
                }
            };
        let value = fieldguard::value::json::parse(obj.to_string().as_bytes()).unwrap();
        let ours = fieldguard::validation::config_data::errors(&value, "", kind);
        let we_say: Option<Causes> = (!ours.is_empty()).then(|| {
            ours.into_iter()
                .map(|(e, _)| (e.field, e.reason, e.message))
                .collect()
        });
        if server_says != we_say {
            disagreements.push(format!(
                "{name}:\n  server: {server_says:?}\n  fieldguard: {we_say:?}"
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s) with kube-apiserver:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
