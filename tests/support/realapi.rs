//! The real apiserver (`../shared/realapi`): Kubernetes 1.36's apiextensions-apiserver over
//! etcd, built by `scripts/setup.sh` into `.realapi/`. Kube-apiserver's own request handling,
//! field manager, 409/422 bodies and watches, for custom resources: the judge of what
//! fieldguard predicts or writes.
//!
//! One server per test binary ([`shared`]); a watchdog process stops it when the binary exits,
//! however it exits. Ports come from below the kernel's ephemeral range, so no `bind(port 0)`
//! elsewhere in the tests can take them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A running real apiserver.
pub struct RealApi {
    /// Run directory: data, PKI, logs, kubeconfig.
    pub run: PathBuf,
    /// Kubeconfig with contexts `admin` and `viewer`.
    pub kubeconfig: PathBuf,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn shared() -> PathBuf {
    std::env::var_os("FIELDGUARD_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"))
}

fn built(out: &Path) -> bool {
    ["etcd", "apiextensions-apiserver", "coreshim"]
        .iter()
        .all(|b| out.join("bin").join(b).exists())
}

/// The server shared by this test binary, started on first use; `None` when it is not built
/// (a failure instead when `FIELDGUARD_REQUIRE_REALAPI` is set, as in `scripts/test.sh`).
pub fn shared_server() -> Option<&'static RealApi> {
    static SERVER: OnceLock<Option<RealApi>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let out = root().join(".realapi");
            if !built(&out) {
                assert!(
                    std::env::var_os("FIELDGUARD_REQUIRE_REALAPI").is_none(),
                    "the real apiserver is not built: run scripts/setup.sh"
                );
                eprintln!("skipping the real tier: run scripts/setup.sh to build .realapi/");
                return None;
            }
            Some(RealApi::start(&out))
        })
        .as_ref()
}

/// A base port below the ephemeral range with four free ports.
fn free_base_port() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let span = low.saturating_sub(12000).max(400) / 4;
    let mut seed = std::process::id() as u64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
    for _ in 0..1000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let base = low - 4 - ((seed >> 33) % span as u64) as u16 * 4;
        let free = (base..base + 4).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no four free ports below {low}");
}

impl RealApi {
    fn start(out: &Path) -> RealApi {
        let port = free_base_port();
        let run =
            std::env::temp_dir().join(format!("fieldguard-realapi-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        std::fs::create_dir_all(&run).unwrap();
        let o = Command::new("bash")
            .arg(shared().join("realapi/start.sh"))
            .env("REALAPI_OUT", out)
            .env("REALAPI_RUN", &run)
            .env("REALAPI_PORT", port.to_string())
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "the real apiserver did not start: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let kubeconfig = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        // The watchdog: stops the server when this test binary is gone.
        let stop = shared().join("realapi/stop.sh");
        let status = Command::new("bash")
            .arg("-c")
            .arg(
                r#"( while kill -0 "$FG_PID" 2>/dev/null; do sleep 0.5; done; bash "$FG_STOP" "$FG_RUN"; rm -rf "$FG_RUN" ) >/dev/null 2>&1 </dev/null &"#,
            )
            .env("FG_PID", std::process::id().to_string())
            .env("FG_STOP", &stop)
            .env("FG_RUN", &run)
            .status()
            .unwrap();
        assert!(status.success(), "the watchdog did not start");
        RealApi { run, kubeconfig }
    }

    /// A client as the `admin` context (allowed everything).
    pub async fn api(&self) -> fieldguard::live::cluster::Api {
        self.api_as("admin").await
    }

    /// A client of the given context (`admin` or `viewer`).
    pub async fn api_as(&self, context: &str) -> fieldguard::live::cluster::Api {
        let opts = fieldguard::live::cluster::ClusterOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            context: Some(context.into()),
        };
        fieldguard::live::cluster::Api::connect(&opts)
            .await
            .unwrap()
            .0
    }
}
