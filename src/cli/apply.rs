//! `fieldguard apply`: predict, then apply a release (server-side or client-side by HIP-0023),
//! and report per object.

use super::check::manifest_inputs;
use super::{EXIT_APPLY_FAILED, EXIT_CONFLICTS, EXIT_INVALID, EXIT_UNREACHABLE, ExitCode};
use crate::apply::release::ServerSide;
use crate::apply::run::{self, Outcome, Request, RunError};
use crate::live::api::ClusterOptions;
use crate::live::cluster::Cluster;
use crate::live::state::LiveState;
use crate::manifest;
use crate::report::{self, Format};
use clap::{Args, ValueEnum};
use std::io::IsTerminal;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// The release name (its revision records live in the release namespace).
    #[arg(value_name = "RELEASE")]
    pub release: String,
    /// Manifest files or directories; `-` reads standard input.
    #[arg(value_name = "MANIFEST")]
    pub manifests: Vec<String>,
    /// More manifests (as kubectl's -f; repeatable).
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub filenames: Vec<String>,
    /// The release namespace (and the namespace of objects that name none).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config).
    #[arg(long, env = "KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The field manager of the release's writes.
    #[arg(long, env = "FIELDGUARD_FIELD_MANAGER", default_value = "fieldguard")]
    pub field_manager: String,
    /// HIP-0023: `true` server-side apply, `false` client-side apply, `auto` server-side for
    /// installs and the previous revision's method for upgrades and rollbacks (client-side when
    /// it recorded none, as Helm 3 releases).
    #[arg(long, value_enum, default_value = "auto")]
    pub server_side: ServerSide,
    /// Take over every conflicting field.
    #[arg(long, conflicts_with = "force_against")]
    pub force_conflicts: bool,
    /// Take over fields only from managers whose whole name matches REGEX (repeatable); any
    /// other conflict stops the release before anything is written.
    #[arg(long, value_name = "REGEX")]
    pub force_against: Vec<String>,
    /// Roll back to this revision's manifest (a new revision).
    #[arg(long, value_name = "REVISION", conflicts_with_all = ["manifests", "filenames"])]
    pub rollback: Option<u32>,
    /// Show the prediction and stop.
    #[arg(long)]
    pub plan: bool,
    /// Send every write with dryRun=All; record nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Each write carries the resourceVersion the prediction used: apply exactly what was
    /// predicted or fail cleanly.
    #[arg(long)]
    pub expect_unchanged: bool,
    /// Bring objects that exist but belong to no release into this one.
    #[arg(long)]
    pub adopt: bool,
    /// More managers to move ownership from when the release switches to server-side apply
    /// (repeatable; the usual client-side managers are found without it).
    #[arg(long, value_name = "MANAGER")]
    pub migrate_from: Vec<String>,
    /// Wait until workloads are ready (Deployments, StatefulSets, DaemonSets roll out; Jobs
    /// complete), up to this long (e.g. 300s, 5m).
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "5m", value_parser = parse_duration)]
    pub wait: Option<Duration>,
    /// Recreate objects whose update the server would refuse (an immutable field): delete,
    /// wait, create — shown in the prediction with what it destroys. StatefulSets, PVCs and PVs
    /// only when the object itself says `fieldguard.dev/recreate: if-immutable`; Jobs that are
    /// not hooks recreate without it, as nelm does.
    #[arg(long)]
    pub recreate_on_immutable: bool,
    /// How long one hook may take, waiting for its Job or Pod included (Helm's `--timeout`).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Output of the prediction and the results.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
    /// Accept manifests that hold no object: every object of the release is deleted
    /// (otherwise exit 2: an empty input is usually a failed render upstream).
    #[arg(long)]
    pub allow_empty: bool,
    #[command(flatten)]
    pub limits: super::limits::LimitArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map_or((s, "s"), |i| (&s[..i], &s[i..]));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 90s, 5m, 1h)"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (s, m, h)")),
    };
    Ok(Duration::from_secs(secs))
}

pub fn run(args: ApplyArgs) -> ExitCode {
    let force = match super::check::force_of(args.force_conflicts, &args.force_against) {
        Ok(f) => f,
        Err(code) => return code,
    };
    if args.release.is_empty() || args.field_manager.is_empty() {
        return super::usage_error("the release name and --field-manager must not be empty");
    }
    if let Some(e) = super::field_manager_refused(&args.field_manager) {
        return e;
    }
    let (documents, manifest_text) = if args.rollback.is_some() {
        (vec![], String::new())
    } else {
        let inputs = match manifest_inputs(&args.manifests, &args.filenames) {
            Ok(i) => i,
            Err(e) => return super::usage_error(&e),
        };
        // The manifest text is recorded on the revision; read it once.
        let limits = args.limits.manifests(manifest::Limits::MANIFESTS);
        let (files, errors) = manifest::read_files(&inputs, &mut std::io::stdin().lock(), &limits);
        if !errors.is_empty() {
            return invalid(&errors, &args);
        }
        let mut loaded = manifest::Loaded::new(limits);
        let mut text = String::new();
        for (name, bytes) in &files {
            manifest::parse_into(name, bytes, &mut loaded);
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            if !text.is_empty() {
                text.push_str("---\n");
            }
            text.push_str(&String::from_utf8_lossy(bytes));
        }
        if !loaded.errors.is_empty() {
            return invalid(&loaded.errors, &args);
        }
        if loaded.documents.is_empty() && !args.allow_empty {
            return invalid(&[super::check::no_objects(&inputs)], &args);
        }
        (loaded.documents, text)
    };
    let (rt, cluster) = match connect(&args.kubeconfig, &args.context) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let namespace = args
        .namespace
        .clone()
        .or_else(|| cluster.default_namespace())
        .unwrap_or_else(|| "default".into());
    let req_namespace = namespace.clone();
    let driver = match crate::apply::storage::Driver::from_env() {
        Ok(d) => d,
        Err(e) => return super::usage_error(&e.0),
    };
    let req = Request {
        release: args.release.clone(),
        namespace,
        field_manager: args.field_manager.clone(),
        server_side: args.server_side,
        force,
        documents,
        manifest: manifest_text,
        rollback_to: args.rollback,
        plan_only: args.plan,
        dry_run: args.dry_run,
        expect_unchanged: args.expect_unchanged,
        adopt: args.adopt,
        migrate_from: args.migrate_from.clone(),
        wait: args.wait,
        poll: Duration::from_secs(2),
        driver,
        hook_timeout: args.timeout,
        recreate_on_immutable: args.recreate_on_immutable,
    };
    let mut progress = |line: &str| eprintln!("{line}");
    let result = rt.block_on(run::run(cluster.api(), req, &mut progress));
    match result {
        Ok(outcome) => finish(&outcome, args.output),
        Err(RunError::Invalid(errors)) => invalid(&errors, &args),
        Err(RunError::Refused(m)) => {
            if args.output == Output::Json {
                let doc = serde_json::json!({
                    "apiVersion": report::SCHEMA_VERSION,
                    "kind": "ApplyRefused",
                    "release": args.release,
                    "namespace": req_namespace,
                    "message": m,
                });
                let _ = super::write_stdout(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                ));
            }
            for line in m.lines() {
                eprintln!("error: {}", crate::report::printable(line));
            }
            eprintln!("nothing was applied");
            ExitCode::from(EXIT_INVALID)
        }
        Err(RunError::Cluster(m)) => {
            eprintln!("error: {m}");
            ExitCode::from(EXIT_UNREACHABLE)
        }
    }
}

/// The runtime and the cluster a release command works on; the exit code when either fails.
pub(super) fn connect(
    kubeconfig: &Option<std::path::PathBuf>,
    context: &Option<String>,
) -> Result<(tokio::runtime::Runtime, Cluster), ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| super::usage_error(&format!("cannot start the runtime: {e}")))?;
    let cluster = rt
        .block_on(Cluster::connect(&ClusterOptions {
            kubeconfig: kubeconfig.clone(),
            context: context.clone(),
        }))
        .map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_UNREACHABLE)
        })?;
    Ok((rt, cluster))
}

/// Invalid input: located problems on standard error (and as JSON with `-o json`); exit 2.
fn invalid(errors: &[manifest::ManifestError], args: &ApplyArgs) -> ExitCode {
    let format = match args.output {
        Output::Json => Format::Json,
        Output::Text => Format::Text,
    };
    super::check::invalid_input(errors, format)
}

pub(super) fn finish(o: &Outcome, output: Output) -> ExitCode {
    let text = match output {
        Output::Json => {
            let prediction = report::render(&o.prediction, Format::Json, false);
            let mut v = serde_json::to_value(o).unwrap_or_default();
            if let (Some(m), Ok(p)) = (
                v.as_object_mut(),
                serde_json::from_str::<serde_json::Value>(&prediction),
            ) {
                m.insert("prediction".into(), p);
            }
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Output::Text => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let mut t = report::render(&o.prediction, Format::Text, color);
            t.push_str(&summary(o));
            t
        }
    };
    if let Err(code) = super::check::write_stdout(&text) {
        return code;
    }
    match o.exit_code() {
        0 => ExitCode::SUCCESS,
        1 => ExitCode::from(EXIT_CONFLICTS),
        _ => ExitCode::from(EXIT_APPLY_FAILED),
    }
}

fn summary(o: &Outcome) -> String {
    let mut s = format!(
        "\nrelease {} (namespace {}): {} {} revision {}, {} apply: {}\n",
        o.release,
        o.namespace,
        o.operation,
        if o.operation == "uninstall" {
            "of"
        } else {
            "as"
        },
        o.revision,
        o.method.as_str(),
        o.status
    );
    for (obj, m) in &o.migrations {
        let from: Vec<String> = m.from.iter().map(|(w, n)| format!("{w} ({n})")).collect();
        s.push_str(&format!(
            "  migrate {obj}: fields move from {}\n",
            from.join(", ")
        ));
    }
    for x in &o.objects {
        s.push_str(&format!("  {:<14} {}", x.result.as_str(), x.object));
        if let Some(h) = &x.hook {
            s.push_str(&format!(" ({h} hook)"));
        }
        if !x.forced_from.is_empty() {
            s.push_str(&format!(
                " (fields taken from {})",
                x.forced_from.join(", ")
            ));
        }
        if let Some(m) = &x.message {
            s.push_str(&format!(": {m}"));
        }
        if let Some(r) = &x.readiness {
            s.push_str(&format!(" [{r}]"));
        }
        s.push('\n');
        for e in &x.events {
            s.push_str(&format!("      event: {e}\n"));
        }
        for l in &x.logs {
            s.push_str(&format!(
                "      log of pod {} container {}:\n",
                l.pod, l.container
            ));
            for line in l.text.lines() {
                s.push_str(&format!("        {line}\n"));
            }
        }
    }
    for m in &o.mismatches {
        s.push_str(&format!("  PREDICTION MISMATCH: {m}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("x").is_err());
    }
}
