//! `check --server`: the same check, answered by a running fieldguard service.

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
    let token = match (&args.token_file, std::env::var("FIELDGUARD_TOKEN")) {
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
        if let Some(ca) = &args.server_ca {
            t = t.ca_certificate(tonic::transport::Certificate::from_pem(read(
                "--server-ca",
                ca,
            )?));
        }
        if let (Some(c), Some(k)) = (&args.client_cert, &args.client_key) {
            t = t.identity(tonic::transport::Identity::from_pem(
                read("--client-cert", c)?,
                read("--client-key", k)?,
            ));
        }
        tls = Some(t);
    }
    let mut request = tonic::Request::new(request);
    if let Some(t) = token {
        let v = format!("Bearer {t}")
            .parse()
            .map_err(|_| super::usage_error("the token is not a valid header value"))?;
        request.metadata_mut().insert("authorization", v);
    }
    let response = rt.block_on(async {
        let mut endpoint = tonic::transport::Endpoint::from_shared(uri.clone())
            .map_err(|e| Err(super::usage_error(&format!("--server {server}: {e}"))))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(300));
        if let Some(t) = tls {
            endpoint = endpoint
                .tls_config(t)
                .map_err(|e| Err(super::usage_error(&format!("--server {server}: {e}"))))?;
        }
        let channel = endpoint.connect().await.map_err(|e| {
            Err(unreachable(format!(
                "fieldguard service {uri} unreachable: {}",
                crate::telemetry::error_chain(&e)
            )))
        })?;
        let mut client = AnalysisClient::new(channel).max_decoding_message_size(256 * 1024 * 1024);
        client.predict_conflicts(request).await.map_err(Ok)
    });
    let response = match response {
        Ok(r) => r.into_inner(),
        Err(Err(code)) => return Err(code),
        Err(Ok(status)) => return Err(status_exit(&uri, &status)),
    };
    Ok(response
        .clusters
        .iter()
        .map(|c| convert::report_back(c, &args.field_manager, force.clone()))
        .collect())
}

/// Prints a service error (its located problems first); the matching exit code.
fn status_exit(uri: &str, s: &tonic::Status) -> ExitCode {
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
