//! Differential testing against the real apiserver (`../shared/realapi`: Kubernetes 1.36's own
//! handlers): random histories of writes to custom resources shaped like the built-in kinds'
//! hard parts (`tests/data/realapi/widget-crd.yaml`). Before every server-side apply, fieldguard
//! predicts it from what a user's `check` sees — the live object read from the server, the
//! schema the server publishes at `/openapi/v3` — and the prediction is compared with what the
//! server then does: refused or not (the 409 message word for word, the 422 of a merged object
//! that fails the schema), the stored object, the managedFields (entries, their order,
//! operation, apiVersion, subresource, fields; times only for presence), and whether it wrote
//! at all (the resourceVersion).
//!
//! Between applies, other writers act as they do in clusters, through the server only (their
//! effect is what the next prediction reads): Updates by JSON merge patch and JSON patch,
//! writes through the `status` and `scale` subresources, deletions (the next apply recreates).
//!
//!   FIELDGUARD_REAL_STEPS   steps per run (default 2000)
//!   FIELDGUARD_REAL_SEED    seed (default: from the clock, printed)

mod support;

use support::judge::{compare, contents, predict, stamped};
use support::realapi::{delete, get, with_crd, write};

use fieldguard::live::api::Api;
use fieldguard::predict::Verdict;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

const GROUP_VERSION: &str = "fieldguard.test/v1";
const GROUP: &str = "fieldguard.test";

/// An object of the history: a Widget (one version) or a Gadget (the same type served as v1
/// and v2), and the version a step reads and writes it at.
#[derive(Clone, Copy, Debug)]
struct Obj {
    kind: &'static str,
    plural: &'static str,
    name: &'static str,
    version: &'static str,
}

impl Obj {
    fn api_version(&self) -> String {
        format!("{GROUP}/{}", self.version)
    }

    fn url(&self) -> String {
        format!(
            "/apis/{GROUP}/{}/namespaces/{NAMESPACE}/{}/{}",
            self.version, self.plural, self.name
        )
    }
}

/// The objects of a history; a Gadget's version is chosen per step.
fn pick_obj(rng: &mut StdRng) -> Obj {
    let (kind, plural, name) = *pick(
        rng,
        &[
            ("Widget", "widgets", "w0"),
            ("Widget", "widgets", "w1"),
            ("Widget", "widgets", "w2"),
            ("Gadget", "gadgets", "g0"),
            ("Gadget", "gadgets", "g1"),
        ],
    );
    let version = if kind == "Gadget" {
        *pick(rng, &["v1", "v2"])
    } else {
        "v1"
    };
    Obj {
        kind,
        plural,
        name,
        version,
    }
}
const NAMESPACE: &str = "default";
const APPLIERS: [&str; 3] = ["alice", "bob", "carol"];

fn steps() -> usize {
    std::env::var("FIELDGUARD_REAL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

fn seed() -> u64 {
    std::env::var("FIELDGUARD_REAL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        })
}

/// A random pick from a small domain, so that managers meet on the same fields and values.
fn pick<'a, T>(rng: &mut StdRng, xs: &'a [T]) -> &'a T {
    &xs[rng.gen_range(0..xs.len())]
}

fn some(rng: &mut StdRng) -> bool {
    rng.gen_bool(0.4)
}

fn string_map(rng: &mut StdRng, keys: &[&str]) -> Value {
    let mut m = Map::new();
    for k in keys {
        if rng.gen_bool(0.5) {
            m.insert(k.to_string(), json!(pick(rng, &["a", "b"])));
        }
    }
    Value::Object(m)
}

fn subset(rng: &mut StdRng, xs: &[&str]) -> Vec<Value> {
    xs.iter()
        .filter(|_| rng.gen_bool(0.5))
        .map(|x| json!(x))
        .collect()
}

fn container(rng: &mut StdRng, name: &str) -> Value {
    let mut c = Map::new();
    c.insert("name".into(), json!(name));
    if some(rng) {
        c.insert("image".into(), json!(pick(rng, &["img:1", "img:2"])));
    }
    if some(rng) {
        let mut env = Vec::new();
        for n in ["A", "B"] {
            if rng.gen_bool(0.5) {
                env.push(if rng.gen_bool(0.7) {
                    json!({"name": n, "value": pick(rng, &["1", "2"])})
                } else {
                    json!({"name": n})
                });
            }
        }
        c.insert("env".into(), Value::Array(env));
    }
    if some(rng) {
        let mut ports = Vec::new();
        for (p, proto) in [(80, "TCP"), (80, "UDP"), (443, "TCP")] {
            if rng.gen_bool(0.5) {
                let mut m = json!({"containerPort": p, "protocol": proto});
                if rng.gen_bool(0.3) {
                    m["name"] = json!(pick(rng, &["web", "alt"]));
                }
                ports.push(m);
            }
        }
        c.insert("ports".into(), Value::Array(ports));
    }
    Value::Object(c)
}

/// A random manifest for `o`: every field present or not, values from small domains.
fn manifest(rng: &mut StdRng, o: &Obj) -> Value {
    let mut spec = Map::new();
    if some(rng) {
        spec.insert("replicas".into(), json!(rng.gen_range(1..4)));
    }
    if some(rng) {
        spec.insert("paused".into(), json!(rng.gen_bool(0.5)));
    }
    if some(rng) {
        spec.insert("note".into(), json!(pick(rng, &["x", "y"])));
    }
    if some(rng) {
        spec.insert("labels".into(), string_map(rng, &["tier", "app", "team"]));
    }
    if some(rng) {
        spec.insert("selector".into(), string_map(rng, &["app", "tier"]));
    }
    if some(rng) {
        spec.insert("args".into(), Value::Array(subset(rng, &["x", "y", "z"])));
    }
    if some(rng) {
        spec.insert(
            "finalizers".into(),
            Value::Array(subset(rng, &["f1", "f2", "f3"])),
        );
    }
    if some(rng) {
        let port = if rng.gen_bool(0.5) {
            json!(pick(rng, &[80, 8080]))
        } else {
            json!("http")
        };
        spec.insert("port".into(), port);
    }
    if some(rng) {
        let mut extra = string_map(rng, &["k1", "k2"]);
        if rng.gen_bool(0.5) {
            extra["nested"] = json!({"depth": rng.gen_range(1..3)});
        }
        spec.insert("extra".into(), extra);
    }
    if some(rng) {
        spec.insert(
            "template".into(),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"labels": string_map(rng, &["app"])},
                   "spec": {"restartPolicy": pick(rng, &["Always", "Never"])}}),
        );
    }
    if some(rng) {
        let mut cs = Vec::new();
        for n in ["app", "sidecar", "log"] {
            if rng.gen_bool(0.5) {
                cs.push(container(rng, n));
            }
        }
        spec.insert("containers".into(), Value::Array(cs));
    }
    let mut m = json!({"apiVersion": o.api_version(), "kind": o.kind,
                       "metadata": {"name": o.name, "namespace": NAMESPACE}});
    if rng.gen_bool(0.2) {
        m["metadata"]["labels"] = string_map(rng, &["team", "owner"]);
    }
    if !spec.is_empty() || rng.gen_bool(0.5) {
        m["spec"] = Value::Object(spec);
    }
    m
}

fn object_url(name: &str) -> String {
    format!("/apis/{GROUP_VERSION}/namespaces/{NAMESPACE}/widgets/{name}")
}

/// One write by someone other than the appliers (its answer is not compared: its effect is
/// what the next prediction reads).
async fn other_writer(api: &Api, rng: &mut StdRng, o: &Obj) -> String {
    let url = o.url();
    let merge = "application/merge-patch+json";
    let (what, answer) = match rng.gen_range(0..6) {
        0 => {
            let body = json!({"spec": {"labels": {*pick(rng, &["tier", "app", "hotfix"]): pick(rng, &["a", "b", "c"])}}});
            (
                "merge patch of a label by editor",
                write(
                    api,
                    http::Method::PATCH,
                    &format!("{url}?fieldManager=editor"),
                    merge,
                    &body,
                )
                .await,
            )
        }
        1 => {
            let body =
                json!({"spec": {"replicas": rng.gen_range(1..6), "note": pick(rng, &["x", "z"])}});
            (
                "merge patch of replicas and note by editor",
                write(
                    api,
                    http::Method::PATCH,
                    &format!("{url}?fieldManager=editor"),
                    merge,
                    &body,
                )
                .await,
            )
        }
        2 => {
            let body = json!([{"op": "add", "path": "/spec/paused", "value": rng.gen_bool(0.5)}]);
            (
                "JSON patch of paused by kubectl-edit",
                write(
                    api,
                    http::Method::PATCH,
                    &format!("{url}?fieldManager=kubectl-edit"),
                    "application/json-patch+json",
                    &body,
                )
                .await,
            )
        }
        3 => {
            let body = json!({"status": {"phase": pick(rng, &["Ready", "Pending"]), "replicas": rng.gen_range(0..4)}});
            (
                "status write by controller",
                write(
                    api,
                    http::Method::PATCH,
                    &format!("{url}/status?fieldManager=controller"),
                    merge,
                    &body,
                )
                .await,
            )
        }
        4 => {
            let body = json!({"spec": {"replicas": rng.gen_range(1..6)}});
            (
                "scale write by autoscaler",
                write(
                    api,
                    http::Method::PATCH,
                    &format!("{url}/scale?fieldManager=autoscaler"),
                    merge,
                    &body,
                )
                .await,
            )
        }
        _ => (
            "delete",
            write(
                api,
                http::Method::DELETE,
                &url,
                "application/json",
                &json!({}),
            )
            .await,
        ),
    };
    match answer {
        Ok(_) => what.to_string(),
        Err(r) => format!("{what}: refused {} ({})", r.code, r.message),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_equal_what_the_real_apiserver_does() {
    let Some((api, _)) = with_crd("widget-crd.yaml", GROUP_VERSION).await else {
        return;
    };
    let Some((_, mut catalog)) = with_crd(
        "gadget-crd.yaml",
        &[GROUP_VERSION, "fieldguard.test/v2"].join(","),
    )
    .await
    else {
        return;
    };
    let seed = seed();
    let n = steps();
    println!("real apiserver differential: {n} steps, seed {seed} (FIELDGUARD_REAL_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut history: Vec<String> = Vec::new();
    let mut disagreements = Vec::new();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for step in 0..n {
        let o = pick_obj(&mut rng);
        let name = format!("{} {}", o.api_version(), o.name);
        if rng.gen_bool(0.25) {
            let what = other_writer(&api, &mut rng, &o).await;
            history.push(format!("{step}: {name}: {what}"));
            continue;
        }
        let manager = *pick(&mut rng, &APPLIERS);
        let force = rng.gen_bool(0.3);
        let m = manifest(&mut rng, &o);
        let live = get(&api, &o.url()).await;
        let before = time::OffsetDateTime::now_utc().unix_timestamp();
        let mut p = predict(
            &mut catalog,
            NAMESPACE,
            live.as_ref(),
            &m,
            manager,
            force,
            before,
        );
        let url = format!(
            "{}?fieldManager={manager}{}",
            o.url(),
            if force { "&force=true" } else { "" }
        );
        let answer = write(
            &api,
            http::Method::PATCH,
            &url,
            "application/apply-patch+yaml",
            &m,
        )
        .await;
        // The clock is an input, not a prediction: entries are sorted by their time in
        // seconds, so when the server's second differs from the one predicted with, predict
        // again (from the same live object) with the server's.
        // Only when the server wrote: otherwise the stamp is an old one, and predicting with
        // it could hide a wrongly predicted write.
        let wrote = answer.as_ref().is_ok_and(|a| {
            live.as_ref().map(|l| &l["metadata"]["resourceVersion"])
                != Some(&a["metadata"]["resourceVersion"])
        });
        if wrote
            && let Some(t) = stamped(&answer, manager)
            && t != before
        {
            p = predict(
                &mut catalog,
                NAMESPACE,
                live.as_ref(),
                &m,
                manager,
                force,
                t,
            );
        }
        let outcome = match &answer {
            Ok(_) => format!("{:?}", p.verdict),
            Err(r) => format!("refused {}", r.code),
        };
        *counts.entry(outcome).or_default() += 1;
        *counts
            .entry(format!("{} at {}", o.kind, o.version))
            .or_default() += 1;
        let found = compare(&p, live.as_ref(), &answer);
        if !p.notes.is_empty() {
            let what = if wrote { "rewrote" } else { "did not write" };
            *counts
                .entry(format!("noted stored form, server {what}"))
                .or_default() += 1;
        }
        history.push(format!(
            "{step}: {name}: apply by {manager}{}: {m}",
            if force { " (forced)" } else { "" }
        ));
        if !found.is_empty() {
            disagreements.push(format!(
                "step {step} ({name}, {manager}, force {force})\n  manifest {m}\n  live {}\n  server {}\n  {}",
                live.map(|l| l.to_string()).unwrap_or_else(|| "none".into()),
                match &answer {
                    Ok(v) => v.to_string(),
                    Err(r) => format!("{r:?}"),
                },
                found.join("\n  ")
            ));
            if disagreements.len() >= 5 {
                break;
            }
        }
    }
    println!("real apiserver differential: outcomes {counts:?}");
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s) with the real apiserver (seed {seed}):\n{}\nlast steps:\n{}",
        disagreements.len(),
        disagreements.join("\n"),
        history[history.len().saturating_sub(15)..].join("\n")
    );
    // Every kind of outcome was exercised.
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    for want in [
        "Created",
        "Configured",
        "refused 409",
        "refused 422",
        "Gadget at v2",
    ] {
        assert!(count(want) > 0 || n < 500, "no {want} among {counts:?}");
    }
    // Applies that change no contents are rare at random (one in several hundred): the
    // scenario test below covers them deterministically.
}

/// The two divergences found when fieldguard first met the real apiserver, as scenarios: a
/// merge that empties a non-nullable map is refused with 422 (predicted `rejected`, the
/// server's message word for word), and a manager that claims no new value still gets an
/// entry, so the server writes (predicted `ownership-only`, the resourceVersion moves).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emptied_maps_are_rejected_and_ownership_only_applies_are_writes() {
    let Some((api, mut catalog)) = with_crd("widget-crd.yaml", GROUP_VERSION).await else {
        return;
    };
    let name = "scenario";
    let url = object_url(name);
    delete(&api, &url).await;
    let apply = |manager: &str| format!("{url}?fieldManager={manager}");
    let ctype = "application/apply-patch+yaml";
    // kubectl-edit (a merge patch) creates the empty map and owns it (`f:labels: {}`); ops
    // then owns spec.labels.tier.
    let ops = |labels: bool| {
        let mut m = json!({"apiVersion": GROUP_VERSION, "kind": "Widget",
                           "metadata": {"name": name, "namespace": NAMESPACE},
                           "spec": {"note": "x"}});
        if labels {
            m["spec"]["labels"] = json!({"tier": "b"});
        }
        m
    };
    write(&api, http::Method::PATCH, &apply("ops"), ctype, &ops(false))
        .await
        .unwrap();
    write(
        &api,
        http::Method::PATCH,
        &format!("{url}?fieldManager=kubectl-edit"),
        "application/merge-patch+json",
        &json!({"spec": {"labels": {}}}),
    )
    .await
    .unwrap();
    write(&api, http::Method::PATCH, &apply("ops"), ctype, &ops(true))
        .await
        .unwrap();
    let now = || time::OffsetDateTime::now_utc().unix_timestamp();

    // ops drops `labels`: tier goes, the emptied map becomes null, and the schema refuses it.
    let without = ops(false);
    let live = get(&api, &url).await;
    let p = predict(
        &mut catalog,
        NAMESPACE,
        live.as_ref(),
        &without,
        "ops",
        false,
        now(),
    );
    let answer = write(&api, http::Method::PATCH, &apply("ops"), ctype, &without).await;
    assert_eq!(p.verdict, Verdict::Rejected, "{p:?}");
    let refusal = answer.unwrap_err();
    assert_eq!(refusal.code, 422);
    assert_eq!(p.message.as_deref(), Some(refusal.message.as_str()));
    assert_eq!(
        p.message.as_deref(),
        Some(
            "Widget.fieldguard.test \"scenario\" is invalid: spec.labels: Invalid value: \"null\": spec.labels in body must be of type object: \"null\""
        )
    );

    // A manager with no entry applies a manifest that sets nothing new: only its entry is
    // added, and the server writes.
    let live = get(&api, &url).await;
    let p = predict(
        &mut catalog,
        NAMESPACE,
        live.as_ref(),
        &without,
        "newcomer",
        false,
        now(),
    );
    assert_eq!(p.verdict, Verdict::OwnershipOnly, "{p:?}");
    let stored = write(
        &api,
        http::Method::PATCH,
        &apply("newcomer"),
        ctype,
        &without,
    )
    .await
    .unwrap();
    let live = live.unwrap();
    assert_ne!(
        live["metadata"]["resourceVersion"], stored["metadata"]["resourceVersion"],
        "the server wrote"
    );
    assert_eq!(
        contents(&live),
        contents(&stored),
        "and changed no contents"
    );
    // Entries are ordered by their time in seconds: compare with the server's clock. (Here the
    // new entry has no time at all — the object did not change — and the engine agrees.)
    let p = match stamped(&Ok(stored.clone()), "newcomer") {
        Some(t) => predict(
            &mut catalog,
            NAMESPACE,
            Some(&live),
            &without,
            "newcomer",
            false,
            t,
        ),
        None => p,
    };
    let found = compare(&p, Some(&live), &Ok(stored.clone()));
    assert!(found.is_empty(), "{found:?}");

    // Applied again: nothing at all changes, no write.
    let p = predict(
        &mut catalog,
        NAMESPACE,
        Some(&stored),
        &without,
        "newcomer",
        false,
        now(),
    );
    assert_eq!(p.verdict, Verdict::Unchanged, "{p:?}");
    let again = write(
        &api,
        http::Method::PATCH,
        &apply("newcomer"),
        ctype,
        &without,
    )
    .await
    .unwrap();
    assert_eq!(
        stored["metadata"]["resourceVersion"],
        again["metadata"]["resourceVersion"]
    );
}

/// The documented divergence, as a scenario: an apply of `template.metadata.labels: {}` is
/// stored as sent when it comes through the storage version (v1) but normalized when it comes
/// through another (v2); the server serves `metadata: {}` either way, and the manager owns
/// `labels` either way. The next apply that changes nothing is a write in the first case and
/// none in the second — and nothing a client can read tells them apart. fieldguard predicts
/// `unchanged` with a note saying the server may rewrite; here is the server doing both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_form_rewrites() {
    let Some((api, _)) = with_crd("widget-crd.yaml", GROUP_VERSION).await else {
        return;
    };
    let Some((_, mut catalog)) = with_crd(
        "gadget-crd.yaml",
        &[GROUP_VERSION, "fieldguard.test/v2"].join(","),
    )
    .await
    else {
        return;
    };
    for (version, rewrites) in [("v1", true), ("v2", false)] {
        let o = Obj {
            kind: "Gadget",
            plural: "gadgets",
            name: "stored",
            version,
        };
        let _ = write(
            &api,
            http::Method::DELETE,
            &o.url(),
            "application/json",
            &json!({}),
        )
        .await;
        let with_empty_labels = json!({"apiVersion": o.api_version(), "kind": "Gadget",
            "metadata": {"name": "stored", "namespace": NAMESPACE},
            "spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {}},
                                  "spec": {"restartPolicy": "Never"}}}});
        write(
            &api,
            http::Method::PATCH,
            &format!("{}?fieldManager=bob", o.url()),
            "application/apply-patch+yaml",
            &with_empty_labels,
        )
        .await
        .unwrap();
        let live = get(&api, &o.url()).await.unwrap();
        assert_eq!(
            live["spec"]["template"]["metadata"],
            json!({}),
            "served normalized"
        );
        assert!(
            live["metadata"]["managedFields"]
                .to_string()
                .contains("f:labels")
        );
        let nothing = json!({"apiVersion": o.api_version(), "kind": "Gadget",
                             "metadata": {"name": "stored", "namespace": NAMESPACE}});
        let p = predict(
            &mut catalog,
            NAMESPACE,
            Some(&live),
            &nothing,
            "alice",
            false,
            0,
        );
        assert_eq!(p.verdict, Verdict::Unchanged);
        assert!(
            p.notes
                .iter()
                .any(|n| n.contains(".spec.template.metadata.labels is owned but not served")),
            "{:?}",
            p.notes
        );
        let answer = write(
            &api,
            http::Method::PATCH,
            &format!("{}?fieldManager=alice", o.url()),
            "application/apply-patch+yaml",
            &nothing,
        )
        .await
        .unwrap();
        let wrote = answer["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"];
        assert_eq!(wrote, rewrites, "written through {version}");
        assert!(compare(&p, Some(&live), &Ok(answer)).is_empty());
    }
}
