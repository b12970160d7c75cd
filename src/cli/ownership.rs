//! `fieldguard blame` and `fieldguard managers`: who owns what, from a snapshot, a file or a
//! cluster.

use super::check::Color;
use super::live::{LiveArgs, LiveSource, failed};
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
    let objects: Vec<(ObjectRef, Value)>;
    let catalog: Catalog;
    if is_file {
        let mut inputs = vec![Input::parse(&args.target)];
        inputs.extend(args.live.snapshot.iter().map(|s| Input::parse(s)));
        let limits = args.live.limits.snapshot();
        let snap = match Snapshot::load_within(&inputs, &mut std::io::stdin().lock(), &limits) {
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
        let read: Result<Vec<(ObjectRef, Value)>, _> = snap
            .objects()
            .filter(|(_, e)| args.target == "-" || *e.origin.file == *target_file)
            .map(|(r, e)| Ok((r.clone(), e.value()?)))
            .collect();
        objects = match read {
            Ok(o) => o,
            Err(e) => return print_errors(&[e]),
        };
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
        // No `-n`: a snapshot's object in any namespace, a cluster's in the context's.
        let ns = LiveSource::explicit_namespace(&args.live).unwrap_or("");
        let found = match source.block_on(source.state.find(kind, ns, name)) {
            Ok(f) => f,
            Err(e) => return failed(e, crate::report::Format::Text),
        };
        if found.len() > 1 {
            let names: Vec<String> = found.iter().map(|(r, _)| r.to_string()).collect();
            return usage_error(&format!(
                "{} matches several objects ({}): name one with -n",
                args.target,
                names.join(", ")
            ));
        }
        let versions: BTreeSet<String> = found
            .iter()
            .map(|(_, o)| o.str_at(&["apiVersion"]).unwrap_or("").to_string())
            .collect();
        catalog = match source.block_on(source.state.catalog(&versions)) {
            Ok(c) => c,
            Err(e) => return failed(e, crate::report::Format::Text),
        };
        objects = found.into_iter().map(|(r, o)| (r, (*o).clone())).collect();
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

pub fn managers(args: ManagersArgs) -> ExitCode {
    let source = match LiveSource::open(&args.live) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // `-n` narrows namespaced objects; cluster-scoped ones (CRDs, namespaces) stay.
    let ns = LiveSource::explicit_namespace(&args.live);
    let all = match source.block_on(source.state.list(ns)) {
        Ok(all) => all,
        Err(e) => return failed(e, crate::report::Format::Text),
    };
    let inv = inventory::inventory(all.iter().map(|(r, v)| (r, &**v)));
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
