//! Logs, traces and metrics. Logs go to stderr as text or JSON lines (`--log-format`), filtered
//! by `FIELDGUARD_LOG` (`RUST_LOG` syntax); spans are exported with OpenTelemetry OTLP/gRPC when
//! an endpoint is configured (`--otlp-endpoint` or `OTEL_EXPORTER_OTLP_ENDPOINT`); Prometheus
//! metrics are served over HTTP (`metrics`).

pub mod metrics;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Keeps the trace exporter alive; flushes it when dropped.
pub struct Guard {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            let _ = p.shutdown();
        }
    }
}

/// Installs the global subscriber. `default_level` applies when `FIELDGUARD_LOG` is unset.
/// With an OTLP endpoint (must be called inside a tokio runtime), spans are exported too.
pub fn init(format: LogFormat, default_level: &str, otlp_endpoint: Option<&str>) -> Guard {
    let filter =
        EnvFilter::try_from_env("FIELDGUARD_LOG").unwrap_or_else(|_| EnvFilter::new(default_level));
    let (text, json) = match format {
        LogFormat::Text => (
            // Colours only for a person at a terminal, never into a log file or pipe.
            Some(
                tracing_subscriber::fmt::layer()
                    .with_ansi(
                        std::io::IsTerminal::is_terminal(&std::io::stderr())
                            && std::env::var_os("NO_COLOR").is_none(),
                    )
                    .with_writer(std::io::stderr),
            ),
            None,
        ),
        LogFormat::Json => (
            None,
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            ),
        ),
    };
    let provider = otlp_endpoint.and_then(|ep| match tracer_provider(ep) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("warning: OTLP export disabled: {e}");
            None
        }
    });
    let otel = provider.as_ref().map(|p| {
        use opentelemetry::trace::TracerProvider;
        tracing_opentelemetry::layer().with_tracer(p.tracer("fieldguard"))
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .with(otel)
        .try_init();
    Guard { provider }
}

fn tracer_provider(
    endpoint: &str,
) -> Result<opentelemetry_sdk::trace::SdkTracerProvider, Box<dyn std::error::Error>> {
    use opentelemetry_otlp::WithExportConfig;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("fieldguard")
        .build();
    Ok(opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// An error and its sources, joined (`transport error: tcp connect error: Connection refused`),
/// with a hint where the cause is known to puzzle people.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.last().is_some_and(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    let mut out = parts.join(": ");
    if out.contains("UnsupportedCertVersion") {
        out.push_str(
            " (a certificate is X.509 v1; TLS here needs v3 certificates: create them with \
             extensions, e.g. openssl's -extfile or -addext \"basicConstraints=CA:FALSE\")",
        );
    }
    out
}

#[cfg(test)]
mod chain_tests {
    #[test]
    fn sources_are_joined_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let outer = std::io::Error::other(io);
        assert_eq!(super::error_chain(&outer), "refused");
        #[derive(Debug)]
        struct Wrap(std::io::Error);
        impl std::fmt::Display for Wrap {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Wrap {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let w = Wrap(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "tcp connect error",
        ));
        assert_eq!(super::error_chain(&w), "transport error: tcp connect error");
    }
}
