//! `--server`: answers from a running fieldguard service (the connection, shared by the
//! commands that ask one; `check --server`'s prediction).

use super::check::CheckArgs;
use super::{EXIT_INVALID, EXIT_UNREACHABLE, ExitCode};
use crate::check::{Force, Report};
use crate::manifest::{self, Input};
use crate::service::convert;
use crate::service::proto::{self as pb, analysis_client::AnalysisClient};
use std::time::Duration;
use tonic::Code;
use tonic_types::StatusExt;

fn unreachable(msg: String) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(EXIT_UNREACHABLE)
}

/// Sends the manifests; returns one report per cluster asked for.
pub fn predict(
    server: &str,
    args: &CheckArgs,
    inputs: &[Input],
    force: Force,
) -> Result<Vec<Report>, ExitCode> {
    // The service checks the same limits; reading within them here fails early and locally.
    let limits = args.live.limits.manifests(manifest::Limits::MANIFESTS);
    let (files, errors) = manifest::read_files(inputs, &mut std::io::stdin().lock(), &limits);
    if !errors.is_empty() {
        return Err(super::check::invalid_input(&errors, args.output));
    }
    // Parsed here too: every problem of the files is listed from here, where the service's
    // answer lists only what fits an error's details.
    let mut parsed = manifest::Loaded::new(limits.clone());
    for (name, content) in &files {
        manifest::parse_into(name, content, &mut parsed);
    }
    if !parsed.errors.is_empty() {
        return Err(super::check::invalid_input(&parsed.errors, args.output));
    }
    drop(parsed);
    let request = pb::PredictRequest {
        cluster: String::new(),
        clusters: args.cluster.clone(),
        field_manager: args.field_manager.clone(),
        force: Some(pb::ForcePolicy {
            mode: match force {
                Force::None => pb::ForceMode::Unspecified,
                Force::All => pb::ForceMode::All,
                Force::Against(_) => pb::ForceMode::Selective,
            } as i32,
            against: force.patterns(),
        }),
        manifests: files
            .into_iter()
            .map(|(name, content)| pb::Manifest {
                name: name.to_string(),
                content,
            })
            .collect(),
        default_namespace: args.live.namespace.clone().unwrap_or_default(),
        fresh: args.fresh,
        allow_empty: args.allow_empty,
        operation: args
            .operation
            .map(|o| o.operation().as_str().to_string())
            .unwrap_or_default(),
    };
    let remote = Remote {
        server,
        token_file: args.token_file.as_deref(),
        server_ca: args.server_ca.as_deref(),
        client_cert: args.client_cert.as_deref(),
        client_key: args.client_key.as_deref(),
    };
    let c = connect(&remote)?;
    let request = c.request(request)?;
    let response = c.rt.block_on(async {
        let mut client =
            AnalysisClient::new(c.channel.clone()).max_decoding_message_size(256 * 1024 * 1024);
        client.predict_conflicts(request).await
    });
    let response = response
        .map_err(|status| status_exit(&c.uri, &status))?
        .into_inner();
    Ok(response
        .clusters
        .iter()
        .map(|c| convert::report_back(c, &args.field_manager, force.clone()))
        .collect())
}

/// How to reach a running fieldguard service.
pub struct Remote<'a> {
    /// `host:port`, `http://host:port` or `https://host:port`.
    pub server: &'a str,
    /// A file holding the bearer token (else `FIELDGUARD_TOKEN`, when set).
    pub token_file: Option<&'a std::path::Path>,
    /// With https: the CA that signed the service's certificate, a client certificate and key.
    pub server_ca: Option<&'a std::path::Path>,
    pub client_cert: Option<&'a std::path::Path>,
    pub client_key: Option<&'a std::path::Path>,
}

/// A connection to a service, with the runtime it runs on.
pub struct Connected {
    pub rt: tokio::runtime::Runtime,
    pub channel: tonic::transport::Channel,
    pub uri: String,
    token: Option<String>,
}

impl Connected {
    /// A request carrying the caller's credentials.
    pub fn request<T>(&self, msg: T) -> Result<tonic::Request<T>, ExitCode> {
        let mut request = tonic::Request::new(msg);
        if let Some(t) = &self.token {
            let v = format!("Bearer {t}")
                .parse()
                .map_err(|_| super::usage_error("the token is not a valid header value"))?;
            request.metadata_mut().insert("authorization", v);
        }
        Ok(request)
    }
}

/// Connects (5 s to connect, 300 s per request).
pub fn connect(r: &Remote) -> Result<Connected, ExitCode> {
    let server = r.server;
    let uri = if server.contains("://") {
        server.to_string()
    } else {
        format!("http://{server}")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| unreachable(format!("cannot start the runtime: {e}")))?;
    let read = |flag: &str, p: &std::path::Path| {
        std::fs::read(p).map_err(|e| super::usage_error(&format!("{flag} {}: {e}", p.display())))
    };
    let token = match (r.token_file, std::env::var("FIELDGUARD_TOKEN")) {
        (Some(f), _) => Some(
            String::from_utf8_lossy(&read("--token-file", f)?)
                .trim()
                .to_string(),
        ),
        (None, Ok(t)) if !t.is_empty() => Some(t),
        _ => None,
    };
    let mut tls = None;
    if uri.starts_with("https://") {
        let mut t = tonic::transport::ClientTlsConfig::new().with_native_roots();
        if let Some(ca) = r.server_ca {
            t = t.ca_certificate(tonic::transport::Certificate::from_pem(read(
                "--server-ca",
                ca,
            )?));
        }
        if let (Some(c), Some(k)) = (r.client_cert, r.client_key) {
            t = t.identity(tonic::transport::Identity::from_pem(
                read("--client-cert", c)?,
                read("--client-key", k)?,
            ));
        }
        tls = Some(t);
    }
    let channel = rt.block_on(async {
        let mut endpoint = tonic::transport::Endpoint::from_shared(uri.clone())
            .map_err(|e| super::usage_error(&format!("--server {server}: {e}")))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(300));
        if let Some(t) = tls {
            endpoint = endpoint
                .tls_config(t)
                .map_err(|e| super::usage_error(&format!("--server {server}: {e}")))?;
        }
        endpoint.connect().await.map_err(|e| {
            unreachable(format!(
                "fieldguard service {uri} unreachable: {}",
                crate::telemetry::error_chain(&e)
            ))
        })
    })?;
    Ok(Connected {
        rt,
        channel,
        uri,
        token,
    })
}

/// Prints a service error (its located problems first); the matching exit code.
pub fn status_exit(uri: &str, s: &tonic::Status) -> ExitCode {
    let details = s.get_error_details();
    if let Some(br) = details.bad_request() {
        for v in &br.field_violations {
            eprintln!("error: {}", crate::report::printable(&v.description));
        }
    }
    let mut message = s.message().to_string();
    if let Some(source) = std::error::Error::source(s) {
        message = format!("{message}: {}", crate::telemetry::error_chain(source));
    }
    eprintln!(
        "error: fieldguard service {uri}: {}",
        crate::report::printable(&message)
    );
    match s.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown | Code::Internal => {
            ExitCode::from(EXIT_UNREACHABLE)
        }
        _ => ExitCode::from(EXIT_INVALID),
    }
}
