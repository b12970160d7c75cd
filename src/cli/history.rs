//! `fieldguard history` and `fieldguard fights`: who took which field from whom, and fields
//! that change hands back and forth — asked of a running service (`--server`, which watches
//! with `serve --history`), or learnt here by watching a cluster for a while (`--watch`).

use super::remote::{Remote, connect, status_exit};
use super::{EXIT_INVALID, EXIT_UNREACHABLE, ExitCode, usage_error};
use crate::service::history::{fight, filter, transition};
use crate::service::proto::{self as pb, ownership_client::OwnershipClient};
use clap::{Args, ValueEnum};
use std::time::Duration;

/// Where the history comes from.
#[derive(Args, Debug)]
pub struct SourceArgs {
    /// A running fieldguard service with history on (`serve --history`): `host:port`,
    /// `http://…` or `https://…`.
    #[arg(long, value_name = "ADDR", required_unless_present = "watch")]
    pub server: Option<String>,
    /// With --server: the cluster (a name the service knows; default: its default one).
    #[arg(long, value_name = "NAME", requires = "server")]
    pub cluster: Option<String>,
    /// With --server: a file holding the bearer token (FIELDGUARD_TOKEN passes the token).
    #[arg(
        long,
        env = "FIELDGUARD_TOKEN_FILE",
        value_name = "FILE",
        requires = "server"
    )]
    pub token_file: Option<std::path::PathBuf>,
    /// With --server (https://): the CA of the service's certificate (PEM).
    #[arg(long, value_name = "FILE", requires = "server")]
    pub server_ca: Option<std::path::PathBuf>,
    /// With --server (https://): a client certificate and key (PEM) for mTLS.
    #[arg(long, value_name = "FILE", requires_all = ["server", "client_key"])]
    pub client_cert: Option<std::path::PathBuf>,
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<std::path::PathBuf>,
    /// Instead of a service: watch the cluster here for this long (`90s`, `10m`), then report
    /// what changed hands meanwhile.
    #[arg(long, value_name = "DURATION", value_parser = super::apply::parse_duration, conflicts_with = "server")]
    pub watch: Option<Duration>,
    /// With --watch: kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "FILE", requires = "watch")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// With --watch: kubeconfig context (default: the current one).
    #[arg(long, value_name = "NAME", requires = "watch")]
    pub context: Option<String>,
    /// With --watch: a fight is at least this many takeovers of one field ...
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub fight_flips: usize,
    /// ... within this window.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = super::apply::parse_duration)]
    pub fight_window: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only this kind (`Deployment`).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// Only objects of this name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Only this field and what is below it, as kube prints paths (`.spec.replicas`).
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Only changes this manager lost or gained.
    #[arg(long, value_name = "MANAGER")]
    pub manager: Option<String>,
    /// Only changes seen within this long (`1h`).
    #[arg(long, value_name = "DURATION", value_parser = super::apply::parse_duration)]
    pub since: Option<Duration>,
    /// At most this many.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub limit: u32,
    /// With --server: go on printing changes as they happen.
    #[arg(short = 'f', long, requires = "server")]
    pub follow: bool,
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(Args, Debug)]
pub struct FightsArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    /// Only fights still going on.
    #[arg(long)]
    pub active: bool,
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
}

fn when(secs: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(secs)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| secs.to_string())
}

fn object(o: &Option<pb::ObjectRef>) -> String {
    let o = o.clone().unwrap_or_default();
    if o.namespace.is_empty() {
        format!("{} {}", o.kind, o.name)
    } else {
        format!("{} {}/{}", o.kind, o.namespace, o.name)
    }
}

/// One transition, as a line.
fn line(t: &pb::Transition, output: Output) -> String {
    if output == Output::Json {
        let o = t.object.clone().unwrap_or_default();
        return serde_json::json!({
            "seq": t.seq, "cluster": t.cluster, "apiVersion": o.api_version, "kind": o.kind,
            "namespace": o.namespace, "name": o.name, "path": t.path, "change": t.change,
            "from": t.from, "to": t.to, "operation": t.operation, "subresource": t.subresource,
            "resourceVersion": t.resource_version, "time": t.time, "observed": t.observed,
            "oldValue": t.old_value, "newValue": t.new_value, "fields": t.fields,
        })
        .to_string();
    }
    let by = match (t.operation.as_str(), t.subresource.as_str()) {
        (op, "") => op.to_string(),
        (op, sub) => format!("{op} {sub}"),
    };
    let who = match t.change.as_str() {
        "taken-over" => format!("{} → {} ({by})", t.from.join(","), t.to.join(",")),
        "shared" => format!("now shared with {} ({by})", t.to.join(",")),
        "released" if t.to.is_empty() => format!("released by {}", t.from.join(",")),
        "released" => format!(
            "released by {}, kept by {}",
            t.from.join(","),
            t.to.join(",")
        ),
        _ => format!("{} lost {} field(s)", t.from.join(","), t.fields),
    };
    let values = if t.old_value.is_empty() && t.new_value.is_empty() {
        String::new()
    } else {
        let v = |s: &str| {
            if s.is_empty() {
                "-".to_string()
            } else {
                s.to_string()
            }
        };
        format!("  {} → {}", v(&t.old_value), v(&t.new_value))
    };
    let path = if t.path.is_empty() {
        "(object)"
    } else {
        &t.path
    };
    format!(
        "{}  {}  {}  {}  {who}{values}",
        when(t.observed),
        object(&t.object),
        path,
        t.change.replace('-', " ")
    )
}

fn fight_line(f: &pb::Fight, output: Output) -> String {
    if output == Output::Json {
        let o = f.object.clone().unwrap_or_default();
        return serde_json::json!({
            "apiVersion": o.api_version, "kind": o.kind, "namespace": o.namespace,
            "name": o.name, "path": f.path, "managers": f.managers, "flips": f.flips,
            "firstSeen": f.first_seen, "lastSeen": f.last_seen, "values": f.values,
            "active": f.active,
        })
        .to_string();
    }
    let values = if f.values.is_empty() {
        String::new()
    } else {
        format!("  values {}", f.values.join(", "))
    };
    format!(
        "{}  {}  {}  {} flips between {}  {} … {}{values}",
        if f.active { "ACTIVE" } else { "ended " },
        object(&f.object),
        f.path,
        f.flips,
        f.managers.join(", "),
        when(f.first_seen),
        when(f.last_seen)
    )
}

fn remote(s: &SourceArgs) -> Option<Remote<'_>> {
    Some(Remote {
        server: s.server.as_deref()?,
        token_file: s.token_file.as_deref(),
        server_ca: s.server_ca.as_deref(),
        client_cert: s.client_cert.as_deref(),
        client_key: s.client_key.as_deref(),
    })
}

/// Watches the cluster for the given time with history on; its history.
fn watched(s: &SourceArgs) -> Result<std::sync::Arc<crate::history::History>, ExitCode> {
    let wait = s.watch.unwrap_or_default();
    if s.fight_flips < 2 {
        return Err(usage_error("--fight-flips must be at least 2"));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| usage_error(&format!("cannot start the runtime: {e}")))?;
    let opts = crate::live::api::ClusterOptions {
        kubeconfig: s.kubeconfig.clone(),
        context: s.context.clone(),
    };
    let config = crate::cache::CacheConfig {
        history: Some(crate::history::HistoryConfig {
            fights: crate::history::FightConfig {
                flips: s.fight_flips,
                window: wait_secs(s.fight_window),
                ..Default::default()
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    rt.block_on(async {
        let unreachable = |e: String| {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_UNREACHABLE)
        };
        let (api, _) = crate::live::api::Api::connect(&opts)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let name = s.context.clone().unwrap_or_else(|| "default".into());
        let cache = crate::cache::ClusterCache::start(&name, api, config)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        eprintln!("watching {} for {}s …", cache.name, wait.as_secs());
        tokio::time::sleep(wait).await;
        cache.stop();
        let out = cache.out_of_sync();
        if !out.is_empty() {
            eprintln!(
                "warning: not every kind was watched throughout (out of sync: {}): changes to them may be missing",
                out.join(", ")
            );
        }
        cache
            .history
            .clone()
            .ok_or_else(|| ExitCode::from(EXIT_INVALID))
    })
}

fn wait_secs(d: Duration) -> i64 {
    d.as_secs().max(1) as i64
}

fn print(lines: impl IntoIterator<Item = String>) -> Result<(), ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for l in lines {
        if writeln!(out, "{l}").is_err() {
            return Err(ExitCode::from(EXIT_INVALID));
        }
    }
    Ok(())
}

pub fn history(args: HistoryArgs) -> ExitCode {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let req = pb::HistoryRequest {
        cluster: args.source.cluster.clone().unwrap_or_default(),
        kind: args.kind.clone().unwrap_or_default(),
        namespace: args.namespace.clone().unwrap_or_default(),
        name: args.name.clone().unwrap_or_default(),
        path_prefix: args.path.clone().unwrap_or_default(),
        manager: args.manager.clone().unwrap_or_default(),
        since: args.since.map_or(0, |d| now - d.as_secs() as i64),
        until: 0,
        after: 0,
        limit: args.limit,
    };
    let Some(r) = remote(&args.source) else {
        let h = match watched(&args.source) {
            Ok(h) => h,
            Err(code) => return code,
        };
        let (page, _) = h.query(&filter(&req), 0, args.limit as usize);
        return match print(page.iter().map(|t| line(&transition(t), args.output))) {
            Ok(()) => ExitCode::SUCCESS,
            Err(code) => code,
        };
    };
    let c = match connect(&r) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let result = c.rt.block_on(async {
        let mut client = OwnershipClient::new(c.channel.clone());
        let page = client
            .history(c.request(req.clone()).map_err(Err)?)
            .await
            .map_err(Ok)?
            .into_inner();
        let last = page.transitions.last().map_or(0, |t| t.seq);
        print(page.transitions.iter().map(|t| line(t, args.output))).map_err(Err)?;
        if !args.follow {
            return Ok(());
        }
        let mut follow = req;
        follow.after = last.max(page.next_after);
        let mut stream = client
            .watch_transitions(c.request(follow).map_err(Err)?)
            .await
            .map_err(Ok)?
            .into_inner();
        while let Some(t) = stream.message().await.map_err(Ok)? {
            print([line(&t, args.output)]).map_err(Err)?;
        }
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Ok(status)) => status_exit(&c.uri, &status),
        Err(Err(code)) => code,
    }
}

pub fn fights(args: FightsArgs) -> ExitCode {
    let req = pb::FightsRequest {
        cluster: args.source.cluster.clone().unwrap_or_default(),
        active_only: args.active,
        kind: args.kind.clone().unwrap_or_default(),
        namespace: args.namespace.clone().unwrap_or_default(),
    };
    let fights: Vec<pb::Fight> = match remote(&args.source) {
        None => match watched(&args.source) {
            Ok(h) => h
                .fights()
                .into_iter()
                .filter(|(f, active)| {
                    (!req.active_only || *active)
                        && (req.kind.is_empty() || req.kind == f.kind)
                        && (req.namespace.is_empty() || req.namespace == f.namespace)
                })
                .map(|(f, active)| fight(f, active))
                .collect(),
            Err(code) => return code,
        },
        Some(r) => {
            let c = match connect(&r) {
                Ok(c) => c,
                Err(code) => return code,
            };
            let request = match c.request(req) {
                Ok(r) => r,
                Err(code) => return code,
            };
            let answer = c.rt.block_on(async {
                OwnershipClient::new(c.channel.clone())
                    .fights(request)
                    .await
            });
            match answer {
                Ok(a) => a.into_inner().fights,
                Err(status) => return status_exit(&c.uri, &status),
            }
        }
    };
    match print(fights.iter().map(|f| fight_line(f, args.output))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => code,
    }
}
