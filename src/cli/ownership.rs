//! `fieldguard blame` and `fieldguard managers`: who owns what, from a snapshot, a file or a
//! cluster.

use super::check::Color;
use super::live::{LiveArgs, LiveSource, unreachable};
use super::progress::Progress;
use super::{ExitCode, print_errors, usage_error};
use crate::catalog::Catalog;
use crate::check::{REDACTED, is_secret};
use crate::live::ObjectRef;
use crate::live::snapshot::Snapshot;
use crate::manifest::Input;
use crate::ownership::{blame, inventory};
use crate::value::Value;
use clap::{Args, ValueEnum};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ViewFormat {
    Text,
    Json,
}

#[derive(Args, Debug)]
pub struct BlameArgs {
    /// A file of objects as `kubectl get -o yaml --show-managed-fields` prints them, or
    /// KIND/NAME of an object in the snapshot or cluster (`deploy/web`, `deployments.apps/web`).
    #[arg(value_name = "FILE | KIND/NAME")]
    pub target: String,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Output: text (the object, each line followed by its owners) or JSON (per object: the
    /// lines with their owners, for scripts).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: ViewFormat,
    /// Colour the owners in text output (auto: when standard output is a terminal and
    /// NO_COLOR is unset).
    #[arg(long, value_enum, default_value = "auto")]
    pub color: Color,
}

#[derive(Args, Debug)]
pub struct ManagersArgs {
    #[command(flatten)]
    pub live: LiveArgs,
    /// Output: text (a table of managers with what they own, strays flagged) or JSON (the
    /// inventory, for scripts).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: ViewFormat,
}

fn write_out(text: &str) -> ExitCode {
    match super::write_stdout(text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}

fn color_on(c: Color) -> bool {
    match c {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    }
}

/// Secret values never shown.
fn redacted(r: &ObjectRef, obj: &Value) -> Value {
    if is_secret(r) {
        crate::check::redact_object(obj.clone())
    } else {
        obj.clone()
    }
}

pub fn blame(args: BlameArgs) -> ExitCode {
    let is_file = Path::new(&args.target).is_file() || args.target == "-";
    let mut objects: Vec<(ObjectRef, Value)> = Vec::new();
    let catalog: Catalog;
    if is_file {
        let mut inputs = vec![Input::parse(&args.target)];
        inputs.extend(args.live.snapshot.iter().map(|s| Input::parse(s)));
        let snap = match Snapshot::load(&inputs, &mut std::io::stdin().lock()) {
            Ok(s) => s,
            Err(e) => return print_errors(&e),
        };
        let mut c = match Catalog::kubernetes(&args.live.kubernetes_version) {
            Ok(c) => c,
            Err(e) => return usage_error(&format!("--kubernetes-version: {e}")),
        };
        if let Err(e) = snap.extend_catalog(&mut c) {
            return print_errors(&e);
        }
        catalog = c;
        let target_file = args.target.clone();
        objects = snap
            .objects()
            .filter(|(_, d)| args.target == "-" || *d.origin.file == *target_file)
            .map(|(r, d)| (r.clone(), d.object.clone()))
            .collect();
    } else {
        let Some((kind, name)) = args.target.split_once('/') else {
            return usage_error(&format!(
                "{}: not a file, and not KIND/NAME (e.g. deployment/web)",
                args.target
            ));
        };
        let source = match LiveSource::open(&args.live) {
            Ok(s) => s,
            Err(code) => return code,
        };
        let ns = LiveSource::explicit_namespace(&args.live);
        if let Some(snap) = source.snapshot() {
            let found: Vec<(&ObjectRef, &crate::manifest::Document)> = snap
                .objects()
                .filter(|(r, _)| kind_matches(r, kind) && r.name == name)
                .filter(|(r, _)| ns.is_none_or(|n| r.namespace.is_empty() || r.namespace == n))
                .collect();
            if found.len() > 1 {
                let names: Vec<String> = found.iter().map(|(r, _)| r.to_string()).collect();
                return usage_error(&format!(
                    "{} matches several objects ({}): name one with -n",
                    args.target,
                    names.join(", ")
                ));
            }
            objects = found
                .into_iter()
                .map(|(r, d)| (r.clone(), d.object.clone()))
                .collect();
            catalog = source.catalog.clone();
        } else if let Some(c) = source.cluster() {
            let resources = match c.resources() {
                Ok(r) => r,
                Err(e) => return unreachable(e),
            };
            let Some(res) = resources.iter().find(|r| r.matches(kind)) else {
                return usage_error(&format!("{kind}: the cluster serves no such resource"));
            };
            match c.get(res, &source.namespace, name) {
                Ok(Some(obj)) => objects.push((ObjectRef::of(&obj), obj)),
                Ok(None) => {}
                Err(e) => return unreachable(e),
            }
            let versions: BTreeSet<String> = [res.api_version.clone()].into();
            catalog = match c.catalog_for(&versions) {
                Ok(cat) => cat,
                Err(e) => return unreachable(e),
            };
        } else {
            return usage_error("no source");
        }
    }
    if objects.is_empty() {
        return usage_error(&format!("{}: no such object", args.target));
    }
    let color = color_on(args.color);
    let mut text = String::new();
    let mut docs = Vec::new();
    for (r, obj) in &objects {
        let api_version = obj.str_at(&["apiVersion"]).unwrap_or("");
        let deduced = crate::schema::Schema::deduced();
        let deduced_ref = crate::schema::TypeRef::named(crate::schema::DEDUCED_TYPE);
        let looked_up = catalog.lookup(api_version, &r.kind);
        let (schema, tr) = match &looked_up {
            Ok(i) => (&*i.schema, &i.type_ref),
            Err(e) => {
                eprintln!(
                    "warning: {r}: {e}; blaming without it (list items by position; add the \
                     CRD with --snapshot)"
                );
                (&deduced, &deduced_ref)
            }
        };
        let shown = redacted(r, obj);
        let b = match blame::blame(schema, tr, &shown) {
            Ok(b) => b,
            Err(e) => return usage_error(&format!("{r}: managedFields: {e}")),
        };
        match args.output {
            ViewFormat::Text => {
                if objects.len() > 1 {
                    text.push_str("---\n");
                }
                text.push_str(&crate::report::terminal_safe(
                    &blame::render(&b, color),
                    color,
                ));
            }
            ViewFormat::Json => docs.push(serde_json::json!({"object": r.to_string(), "blame": b})),
        }
    }
    if args.output == ViewFormat::Json {
        text = serde_json::to_string_pretty(&docs).unwrap_or_default();
        text.push('\n');
    }
    debug_assert!(!text.contains(REDACTED) || objects.iter().any(|(r, _)| is_secret(r)));
    write_out(&text)
}

/// `deploy`, `deployment`, `deployments`, `Deployment`, `deployments.apps` for snapshots.
fn kind_matches(r: &ObjectRef, kind: &str) -> bool {
    let (k, group) = match kind.split_once('.') {
        Some((k, g)) => (k, Some(g)),
        None => (kind, None),
    };
    if group.is_some_and(|g| g != r.group) {
        return false;
    }
    let k = k.to_ascii_lowercase();
    let own = r.kind.to_ascii_lowercase();
    k == own
        || k == format!("{own}s")
        || k == format!("{own}es")
        || short_name(&own) == Some(k.as_str())
}

/// kubectl's short names of common built-in kinds.
fn short_name(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "deployment" => "deploy",
        "service" => "svc",
        "configmap" => "cm",
        "namespace" => "ns",
        "horizontalpodautoscaler" => "hpa",
        "daemonset" => "ds",
        "statefulset" => "sts",
        "replicaset" => "rs",
        "serviceaccount" => "sa",
        "persistentvolumeclaim" => "pvc",
        "ingress" => "ing",
        "customresourcedefinition" => "crd",
        "poddisruptionbudget" => "pdb",
        "certificate" => "cert",
        _ => return None,
    })
}

pub fn managers(args: ManagersArgs) -> ExitCode {
    let source = match LiveSource::open(&args.live) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let ns = LiveSource::explicit_namespace(&args.live);
    let inv = if let Some(snap) = source.snapshot() {
        inventory::inventory(
            // As a cluster lists them: `-n` narrows namespaced objects; cluster-scoped ones
            // (CRDs, namespaces) stay.
            snap.objects()
                .filter(|(r, _)| ns.is_none_or(|n| r.namespace.is_empty() || r.namespace == n))
                .map(|(r, d)| (r, &d.object)),
        )
    } else if let Some(c) = source.cluster() {
        let resources = match c.resources() {
            Ok(r) => r,
            Err(e) => return unreachable(e),
        };
        let listable: Vec<_> = resources.iter().filter(|r| r.listable).collect();
        let mut all = Vec::new();
        let mut progress = Progress::new("listed");
        for (i, r) in listable.iter().enumerate() {
            match c.list_metadata(r, ns) {
                Ok(items) => all.extend(items),
                Err(e) => return unreachable(e),
            }
            progress.update(i + 1, listable.len());
        }
        progress.finish();
        inventory::inventory(all.iter().map(|(r, v)| (r, v)))
    } else {
        return usage_error("no source");
    };
    let text = match args.output {
        ViewFormat::Text => crate::report::printable(&inventory::render(&inv)).into_owned(),
        ViewFormat::Json => {
            let mut s = serde_json::to_string_pretty(&inv).unwrap_or_default();
            s.push('\n');
            s
        }
    };
    write_out(&text)
}
