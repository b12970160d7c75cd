//! Differential testing against the real apiserver (`../shared/realapi`: Kubernetes 1.36's own
//! handlers): random histories of writes to custom resources shaped like the built-in kinds'
//! hard parts (`tests/data/realapi/widget-crd.yaml`; `sprocket-crd.yaml`, the same with the
//! server's defaulting; the histories: `real/differential/histories.rs`). Before every
//! server-side apply, fieldguard predicts it from what a user's `check` sees — the live object
//! read from the server, the schema the server publishes at `/openapi/v3` — and the prediction
//! is compared with what the server then does: refused or not (the 409 message word for word,
//! the 422 of a merged object that fails the schema), the stored object, the managedFields
//! (entries, their order, operation, apiVersion, subresource, fields; times only for presence),
//! and whether it wrote at all (the resourceVersion).
//!
//! Between applies, other writers act as they do in clusters, through the server only (their
//! effect is what the next prediction reads): Updates by JSON merge patch and JSON patch,
//! writes through the `status` and `scale` subresources, deletions (the next apply recreates).
//!
//!   FIELDGUARD_REAL_STEPS   steps per run (default 2000)
//!   FIELDGUARD_REAL_SEED    seed (default: from the clock, printed)

mod histories;

use crate::support;

use histories::*;
use support::judge::{History, Judged, Step, apply_judged, compare, contents, predict, stamped};
use support::realapi::{delete, get, with_crd, write};

use fieldguard::predict::Verdict;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// This module's server with the widget, sprocket and gadget CRDs installed, and the catalog
/// a `check` builds for the gadget's two versions (`None`: the real tier is not built).
async fn three_crds() -> Option<(fieldguard::live::api::Api, fieldguard::catalog::Catalog)> {
    let (api, _) = with_crd(module_path!(), "widget-crd.yaml", GROUP_VERSION).await?;
    with_crd(module_path!(), "sprocket-crd.yaml", GROUP_VERSION).await?;
    let (_, catalog) = with_crd(
        module_path!(),
        "gadget-crd.yaml",
        &[GROUP_VERSION, "fieldguard.test/v2"].join(","),
    )
    .await?;
    Some((api, catalog))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predictions_equal_what_the_real_apiserver_does() {
    let Some((api, mut catalog)) = three_crds().await else {
        return;
    };
    let seed = seed();
    let n = steps();
    println!("real apiserver differential: {n} steps, seed {seed} (FIELDGUARD_REAL_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut history = History::default();
    let mut counts = std::collections::BTreeMap::<String, usize>::new();
    for step in 0..n {
        let o = pick_obj(&mut rng);
        let name = format!("{} {}", o.api_version(), o.name);
        if rng.gen_bool(0.25) {
            let what = other_writer(&api, &mut rng, &o).await;
            history.steps.push(format!("{step}: {name}: {what}"));
            continue;
        }
        let manager = *pick(&mut rng, &APPLIERS);
        let force = rng.gen_bool(0.3);
        let m = manifest(&mut rng, &o);
        let live = get(&api, &o.url()).await;
        let Judged {
            prediction: p,
            answer,
            wrote,
        } = apply_judged(
            &api,
            &mut catalog,
            NAMESPACE,
            &o.url(),
            live.as_ref(),
            &m,
            manager,
            force,
        )
        .await;
        let outcome = match &answer {
            Ok(_) => format!("{:?}", p.verdict),
            Err(r) => format!("refused {}", r.code),
        };
        *counts.entry(outcome).or_default() += 1;
        *counts
            .entry(format!("{} at {}", o.kind, o.version))
            .or_default() += 1;
        let found = compare(&p, live.as_ref(), &answer);
        if p.notes.iter().any(|n| n.contains("owned but not served")) {
            let what = if wrote { "rewrote" } else { "did not write" };
            *counts
                .entry(format!("noted stored form, server {what}"))
                .or_default() += 1;
        }
        if p.notes.iter().any(|n| n.contains("fills in its default")) {
            *counts.entry("noted a default put back".into()).or_default() += 1;
        }
        let recorded = Step {
            step,
            name: &name,
            manager,
            force,
            manifest: &m,
            live: live.as_ref(),
            answer: &answer,
        };
        if history.apply(&recorded, &found) {
            break;
        }
    }
    println!("real apiserver differential: outcomes {counts:?}");
    history.assert_agreed("the real apiserver", seed);
    // Every kind of outcome was exercised.
    let count = |k: &str| counts.get(k).copied().unwrap_or(0);
    for want in [
        "Created",
        "Configured",
        "refused 409",
        "refused 422",
        "Gadget at v2",
        "Sprocket at v1",
        "noted a default put back",
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
    let Some((api, mut catalog)) = with_crd(module_path!(), "widget-crd.yaml", GROUP_VERSION).await
    else {
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
    let Some((api, mut catalog)) = three_crds().await else {
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
