//! Ownership history against the real apiserver (`../shared/realapi`): the watch cache records
//! who took which field from whom as the server's own field manager decided it.
//!
//! - Scripted fights: an applier forcing `spec.replicas` against an autoscaler's writes to the
//!   scale subresource; two appliers forcing one label; a hand edit (an Update) reverted by a
//!   forcing pipeline. Each is detected with the right managers and flip count.
//! - A random sequence of ownership-changing writes: the history holds exactly the transitions
//!   the managedFields before and after each write (as the server answered it) imply, in
//!   order, each once.
//! - A restart with the JSON-lines sink keeps the history (same transitions, same numbers).
//! - A long churn (1,200 forced applies) against tight bounds: every transition counted, the
//!   ring and the fight tracker within their bounds, the newest kept, a fight going on among
//!   the churn found with every flip.
//!
//! Waits are for the cache reaching the server's resourceVersion (hang guard 60 s).

use crate::support;

use fieldguard::cache::{CacheConfig, ClusterCache};
use fieldguard::history::{
    Change, FightConfig, Filter, HistoryConfig, ObjectState, Owned, Transition, transition,
};
use fieldguard::live::ObjectRef;
use fieldguard::live::api::Api;
use fieldguard::live::state::LiveState;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::realapi::{shared_server, write};

const NS: &str = "history";
const LIST: &str = "/apis/fieldguard.test/v1/namespaces/history/widgets";

fn url(name: &str) -> String {
    format!("{LIST}/{name}")
}

/// A server-side apply by `manager`; the object the server stored.
async fn apply(api: &Api, name: &str, manager: &str, force: bool, spec: Value) -> Option<Value> {
    let body = json!({"apiVersion": "fieldguard.test/v1", "kind": "Widget",
                      "metadata": {"name": name, "namespace": NS}, "spec": spec});
    write(
        api,
        http::Method::PATCH,
        &format!("{}?fieldManager={manager}&force={force}", url(name)),
        "application/apply-patch+yaml",
        &body,
    )
    .await
    .ok()
}

/// An Update (merge patch) by `manager`, of the object or of a subresource.
async fn update(api: &Api, name: &str, sub: &str, manager: &str, body: Value) -> Value {
    let path = if sub.is_empty() {
        url(name)
    } else {
        format!("{}/{sub}", url(name))
    };
    write(
        api,
        http::Method::PATCH,
        &format!("{path}?fieldManager={manager}"),
        "application/merge-patch+json",
        &body,
    )
    .await
    .unwrap_or_else(|e| panic!("update by {manager}: {e:?}"))
}

/// The cache's object `name` once it reached `rv`.
async fn caught_up(cache: &ClusterCache, name: &str, rv: &str) {
    let r = ObjectRef {
        group: "fieldguard.test".into(),
        kind: "Widget".into(),
        namespace: NS.into(),
        name: name.into(),
    };
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let seen = cache.get(&r).await.ok().flatten();
        let at = seen.as_ref().and_then(|o| {
            o.str_at(&["metadata", "resourceVersion"])
                .map(str::to_string)
        });
        if at.as_deref() == Some(rv) {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "the cache did not reach {name}@{rv}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// manager, operation, subresource, FieldsV1 text, time.
type Entry = (String, String, String, String, Option<i64>);

fn entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_string();
            let time = e["time"]
                .as_str()
                .map(|t| fieldguard::managedfields::parse_time(t).unwrap());
            (
                s("manager"),
                s("operation"),
                s("subresource"),
                e["fieldsV1"].to_string(),
                time,
            )
        })
        .collect()
}

/// What the history should hold for one write: the field changes between the server's
/// managedFields before and after it.
fn state(es: &[Entry]) -> ObjectState<'_> {
    ObjectState {
        entries: es
            .iter()
            .map(|(m, o, s, f, t)| Owned {
                manager: m,
                operation: o,
                subresource: s,
                fields: f,
                time: *t,
            })
            .collect(),
        object: None,
    }
}

fn implied(before: &Value, after: &Value) -> Vec<(String, Change, Vec<String>, Vec<String>)> {
    let (b, a) = (entries(before), entries(after));
    transition::diff(Some(&state(&b)), Some(&state(&a)))
        .unwrap()
        .into_iter()
        .map(|c| {
            let names = |m: Vec<&str>| m.into_iter().map(str::to_string).collect();
            (c.path.to_string(), c.change, names(c.from), names(c.to))
        })
        .collect()
}

fn recorded(ts: &[Arc<Transition>]) -> Vec<(String, Change, Vec<String>, Vec<String>)> {
    ts.iter()
        .map(|t| {
            let names = |m: &[Arc<str>]| m.iter().map(|m| m.to_string()).collect();
            (t.path.to_string(), t.change, names(&t.from), names(&t.to))
        })
        .collect()
}

fn only(name: &str) -> Filter {
    Filter {
        name: name.into(),
        ..Filter::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_of_a_real_server() {
    let Some(server) = shared_server(module_path!()) else {
        return;
    };
    let api = server.api().await;
    support::realapi::install_crd_file(&api, "widget-crd.yaml").await;
    let _ = write(
        &api,
        http::Method::POST,
        "/api/v1/namespaces",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let file =
        std::env::temp_dir().join(format!("fieldguard-history-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let sink = Arc::new(fieldguard::history::sink::Sink::open(&file, 1 << 30).unwrap());
    let history = HistoryConfig {
        sink: Some((sink.clone(), file.clone())),
        ..HistoryConfig::default()
    };
    let config = CacheConfig {
        include_groups: vec!["fieldguard.test".into()],
        full_kinds: vec!["Widget".into()],
        backoff: Duration::from_millis(50),
        history: Some(history.clone()),
        ..CacheConfig::default()
    };
    let cache = ClusterCache::start("real", server.api().await, config)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .expect("initial sync");
    let h = cache.history.clone().unwrap();

    // 1. An applier forcing replicas against an autoscaler writing the scale subresource.
    let mut last = apply(
        &api,
        "web",
        "deployer",
        true,
        json!({"replicas": 2, "note": "v1"}),
    )
    .await
    .unwrap();
    for round in 0..2 {
        update(
            &api,
            "web",
            "scale",
            "autoscaler",
            json!({"spec": {"replicas": 5 + round}}),
        )
        .await;
        last = apply(
            &api,
            "web",
            "deployer",
            true,
            json!({"replicas": 2, "note": "v1"}),
        )
        .await
        .unwrap();
    }
    caught_up(
        &cache,
        "web",
        last["metadata"]["resourceVersion"].as_str().unwrap(),
    )
    .await;
    let ts = h.query(&only("web"), 0, 100).0;
    let takeovers: Vec<(String, String, String, String)> = ts
        .iter()
        .filter(|t| t.change == Change::TakenOver)
        .map(|t| {
            (
                t.path.to_string(),
                t.from.join(","),
                t.to.join(","),
                t.subresource.to_string(),
            )
        })
        .collect();
    assert_eq!(
        takeovers,
        [
            (
                ".spec.replicas".into(),
                "deployer".into(),
                "autoscaler".into(),
                "scale".into()
            ),
            (
                ".spec.replicas".into(),
                "autoscaler".into(),
                "deployer".into(),
                "".into()
            ),
            (
                ".spec.replicas".into(),
                "deployer".into(),
                "autoscaler".into(),
                "scale".into()
            ),
            (
                ".spec.replicas".into(),
                "autoscaler".into(),
                "deployer".into(),
                "".into()
            ),
        ],
        "{ts:#?}"
    );
    // Values come along for kinds cached in full.
    let first = ts.iter().find(|t| t.change == Change::TakenOver).unwrap();
    assert_eq!(
        (first.old_value.as_deref(), first.new_value.as_deref()),
        (Some("2"), Some("5"))
    );
    // 2. Two appliers forcing one label, three times.
    for i in 0..3 {
        apply(
            &api,
            "labels",
            "team-a",
            true,
            json!({"labels": {"team": "a"}}),
        )
        .await;
        last = apply(
            &api,
            "labels",
            "team-b",
            true,
            json!({"labels": {"team": format!("b{i}")}}),
        )
        .await
        .unwrap();
    }
    caught_up(
        &cache,
        "labels",
        last["metadata"]["resourceVersion"].as_str().unwrap(),
    )
    .await;
    // 3. A hand edit reverted by a forcing pipeline, three times.
    apply(&api, "edited", "pipeline", true, json!({"note": "ok"})).await;
    for i in 0..3 {
        update(
            &api,
            "edited",
            "",
            "kubectl-edit",
            json!({"spec": {"note": format!("hotfix {i}")}}),
        )
        .await;
        last = apply(&api, "edited", "pipeline", true, json!({"note": "ok"}))
            .await
            .unwrap();
    }
    caught_up(
        &cache,
        "edited",
        last["metadata"]["resourceVersion"].as_str().unwrap(),
    )
    .await;
    let fights: Vec<(String, String, Vec<String>, u64, bool)> = h
        .fights()
        .into_iter()
        .map(|(f, active)| (f.name, f.path, f.managers, f.flips, active))
        .collect();
    let find = |name: &str| fights.iter().find(|f| f.0 == name).cloned();
    assert_eq!(
        find("web"),
        Some((
            "web".into(),
            ".spec.replicas".into(),
            vec!["autoscaler".into(), "deployer".into()],
            4,
            true
        )),
        "{fights:?}"
    );
    assert_eq!(
        find("labels"),
        Some((
            "labels".into(),
            ".spec.labels.team".into(),
            vec!["team-a".into(), "team-b".into()],
            5,
            true
        )),
        "{fights:?}"
    );
    assert_eq!(
        find("edited"),
        Some((
            "edited".into(),
            ".spec.note".into(),
            vec!["kubectl-edit".into(), "pipeline".into()],
            6,
            true
        )),
        "{fights:?}"
    );

    // 4. Random ownership-changing writes: exactly the implied transitions, in order, once.
    let mut rng = StdRng::seed_from_u64(12);
    let managers = ["alpha", "beta", "gamma"];
    let fields = ["replicas", "note", "paused"];
    let mut before = apply(&api, "random", "alpha", true, json!({"replicas": 1}))
        .await
        .unwrap();
    let start = h.query(&only("random"), 0, 10_000).0.len();
    let mut expected = Vec::new();
    for step in 0..40 {
        let m = managers[rng.gen_range(0..managers.len())];
        let after = match rng.gen_range(0..4) {
            // A forced apply of a random subset of fields.
            0 | 1 => {
                let mut spec = serde_json::Map::new();
                for f in fields {
                    if rng.gen_bool(0.5) {
                        spec.insert(
                            f.into(),
                            match f {
                                "replicas" => json!(rng.gen_range(1..5)),
                                "note" => json!(format!("n{}", rng.gen_range(0..3))),
                                _ => json!(rng.gen_bool(0.5)),
                            },
                        );
                    }
                }
                apply(&api, "random", m, true, Value::Object(spec))
                    .await
                    .unwrap()
            }
            // An apply without force: refused when it conflicts (nothing changes).
            2 => match apply(
                &api,
                "random",
                m,
                false,
                json!({"note": format!("s{step}")}),
            )
            .await
            {
                Some(a) => a,
                None => continue,
            },
            // An Update of the scale subresource (it answers a Scale: the object is read
            // back; nobody else writes it).
            _ => {
                update(
                    &api,
                    "random",
                    "scale",
                    m,
                    json!({"spec": {"replicas": rng.gen_range(1..9)}}),
                )
                .await;
                support::realapi::get(&api, &url("random")).await.unwrap()
            }
        };
        expected.extend(implied(&before, &after));
        before = after;
    }
    caught_up(
        &cache,
        "random",
        before["metadata"]["resourceVersion"].as_str().unwrap(),
    )
    .await;
    let got = recorded(&h.query(&only("random"), 0, 10_000).0[start..]);
    assert!(
        expected.iter().any(|e| e.1 == Change::TakenOver),
        "the sequence took fields over: {expected:?}"
    );
    assert_eq!(got, expected);
    let (kept, bytes, _) = h.usage();
    println!(
        "real history: {kept} transitions kept, {bytes} bytes, {} per transition",
        bytes / kept.max(1)
    );

    // 5. A restart with the sink configured keeps the history.
    cache.stop();
    let all: Vec<Transition> = h
        .query(&Filter::default(), 0, 100_000)
        .0
        .iter()
        .map(|t| (**t).clone())
        .collect();
    sink.flush();
    let again = fieldguard::history::History::new("real", &history);
    let reloaded: Vec<Transition> = again
        .query(&Filter::default(), 0, 100_000)
        .0
        .iter()
        .map(|t| (**t).clone())
        .collect();
    assert_eq!(reloaded, all);
    assert!(again.fights().iter().any(|(f, _)| f.name == "web"));
    let _ = std::fs::remove_file(&file);

    // 6. A long churn against tight bounds: 20 Widgets forced back and forth 30 times.
    let tight = HistoryConfig {
        max_entries: 50,
        max_bytes: 12_000,
        fights: FightConfig {
            max_fields: 8,
            ..FightConfig::default()
        },
        ..HistoryConfig::default()
    };
    let cache = ClusterCache::start(
        "churn",
        server.api().await,
        CacheConfig {
            include_groups: vec!["fieldguard.test".into()],
            backoff: Duration::from_millis(50),
            history: Some(tight),
            ..CacheConfig::default()
        },
    )
    .await
    .unwrap();
    tokio::time::timeout(Duration::from_secs(60), cache.wait_synced())
        .await
        .expect("initial sync");
    let h = cache.history.clone().unwrap();
    let (widgets, rounds) = (20, 30);
    // Each Widget write is followed by one to a hot Widget, its owner alternating each time.
    let mut last = Value::Null;
    let mut hot = 0;
    for round in 0..rounds {
        let manager = if round % 2 == 0 { "left" } else { "right" };
        for w in 0..widgets {
            apply(
                &api,
                &format!("churn-{w}"),
                manager,
                true,
                json!({"replicas": round, "note": format!("r{round}")}),
            )
            .await
            .unwrap();
            last = apply(
                &api,
                "churn-hot",
                if hot % 2 == 0 { "left" } else { "right" },
                true,
                json!({"replicas": hot, "note": format!("h{hot}")}),
            )
            .await
            .unwrap();
            hot += 1;
        }
    }
    caught_up(
        &cache,
        "churn-hot",
        last["metadata"]["resourceVersion"].as_str().unwrap(),
    )
    .await;
    // Each write after an object's first takes over spec.replicas and spec.note.
    let recorded = h.recorded.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(recorded, ((widgets * (rounds - 1) + hot - 1) * 2) as u64);
    let (kept, bytes, evicted) = h.usage();
    assert!(
        kept <= 50 && bytes <= 12_000,
        "{kept} kept in {bytes} bytes"
    );
    assert_eq!(evicted, recorded - kept as u64);
    assert_eq!(h.oldest(), evicted + 1);
    let tail = h.query(&Filter::default(), 0, 1000).0;
    assert_eq!(tail.len(), kept);
    let newest = tail.last().unwrap();
    assert_eq!(
        (&*newest.name, &*newest.from, &*newest.to),
        (
            "churn-hot",
            &[Arc::from("left")][..],
            &[Arc::from("right")][..]
        )
    );
    // 42 fields take turns; the tracker keeps 8 at most. The Widgets' fields flip once in
    // 40 takeovers and are forgotten before they can fight; the hot one's two fields fight
    // throughout, every flip counted: unrelated churn does not push a fight out.
    let fights = h.fights();
    assert!(fights.len() <= 8, "{}", fights.len());
    let hot_fights: Vec<_> = fights
        .iter()
        .filter(|(f, _)| f.name == "churn-hot")
        .map(|(f, active)| (f.path.as_str(), f.flips, *active, f.managers.join(",")))
        .collect();
    assert_eq!(
        hot_fights,
        [
            (".spec.note", hot as u64 - 1, true, "left,right".to_string()),
            (
                ".spec.replicas",
                hot as u64 - 1,
                true,
                "left,right".to_string()
            )
        ]
    );
    println!(
        "real churn: {recorded} transitions from {} writes; {kept} kept in {bytes} bytes, {evicted} evicted, {} fights tracked",
        widgets * rounds + hot,
        fights.len()
    );
    cache.stop();
}
