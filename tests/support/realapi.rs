//! The real apiserver (`../shared/realapi`): Kubernetes 1.36's apiextensions-apiserver over
//! etcd, built by `scripts/setup.sh` into `.realapi/`. Kube-apiserver's own request handling,
//! field manager, 409/422 bodies and watches, for custom resources: the judge of what
//! fieldguard predicts or writes.
//!
//! One server per test module ([`shared_server`]); a watchdog process stops it when the
//! binary exits, however it exits. Ports come from below the kernel's ephemeral range, so no
//! `bind(port 0)` elsewhere in the tests can take them.

use fieldguard::live::api::Api;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// A running real apiserver.
pub struct RealApi {
    /// Run directory: data, PKI, logs, kubeconfig.
    pub run: PathBuf,
    /// Kubeconfig with contexts `admin` and `viewer`.
    pub kubeconfig: PathBuf,
    /// Base port: etcd's client port; the apiserver is at `port + 2`.
    pub port: u16,
    /// The port clients use: the shim in front of the apiextensions-apiserver (`port + 3`),
    /// kube-apiserver itself (`port + 2`).
    pub client: u16,
}

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared material (`FIELDGUARD_SHARED`, default `../shared`).
pub fn shared() -> PathBuf {
    std::env::var_os("FIELDGUARD_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"))
}

/// The server that the tests of module `key` (their `module_path!()`) share, started on
/// first use; `None` when it is not built (a failure instead when `FIELDGUARD_REQUIRE_REALAPI`
/// is set, as in `scripts/test.sh`). The real tier is one test binary: each module keeps a
/// server of its own, so no module sees another's objects, CRDs or restarts, and a module's
/// tests still share theirs.
pub fn shared_server(key: &'static str) -> Option<&'static RealApi> {
    static SERVERS: Servers<RealApi> = Mutex::new(BTreeMap::new());
    per_module(&SERVERS, key, || {
        let l = launch_if_built(&Launch {
            what: "the real apiserver",
            env: "REALAPI",
            out: &root().join(".realapi"),
            bins: &["etcd", "apiextensions-apiserver", "coreshim"],
            require: "FIELDGUARD_REQUIRE_REALAPI",
            start: &shared().join("realapi/start.sh"),
            stop: &shared().join("realapi/stop.sh"),
        })?;
        Some(RealApi {
            run: l.run,
            kubeconfig: l.kubeconfig,
            port: l.port,
            client: l.port + 3,
        })
    })
}

/// Servers kept per test module, each started once.
pub type Servers<T> = Mutex<BTreeMap<&'static str, &'static OnceLock<Option<T>>>>;

/// Module `key`'s server in `servers`, started by `start` on first use (`None`: not built).
pub fn per_module<T: Send + Sync + 'static>(
    servers: &'static Servers<T>,
    key: &'static str,
    start: impl FnOnce() -> Option<T>,
) -> Option<&'static T> {
    // The map is held only to find the slot: servers of different modules start side by side.
    let slot: &'static OnceLock<Option<T>> = servers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_insert_with(|| Box::leak(Box::new(OnceLock::new())));
    slot.get_or_init(start).as_ref()
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

/// How to start one kind of server: a `start.sh` that takes where its binaries are, its run
/// directory and its base port from `{env}_OUT`, `{env}_RUN` and `{env}_PORT` and prints its
/// kubeconfig's path, and the `stop.sh` that stops it given the run directory. `bins`: what
/// `scripts/setup.sh` builds into `out/bin`; `require`: the variable that makes a missing
/// build a failure rather than a skip (`scripts/test.sh` sets it).
pub struct Launch<'a> {
    pub what: &'a str,
    pub env: &'a str,
    pub out: &'a Path,
    pub bins: &'a [&'a str],
    pub require: &'a str,
    pub start: &'a Path,
    pub stop: &'a Path,
}

/// A started server: run directory, kubeconfig, base port.
pub struct Launched {
    pub run: PathBuf,
    pub kubeconfig: PathBuf,
    pub port: u16,
}

/// Starts a server when it is built; `None` (a skip, said on stderr) when it is not and not
/// required.
pub fn launch_if_built(l: &Launch) -> Option<Launched> {
    if !l.bins.iter().all(|b| l.out.join("bin").join(b).exists()) {
        assert!(
            std::env::var_os(l.require).is_none(),
            "{} is not built: run scripts/setup.sh",
            l.what
        );
        eprintln!(
            "skipping the tests of {}: run scripts/setup.sh to build {}",
            l.what,
            l.out.display()
        );
        return None;
    }
    Some(launch(l))
}

/// Starts a server. A start script gives it a while to answer; on a loaded machine that can
/// be short, so a failed start is cleaned up and tried again on other ports (three times at
/// most; every failure's log is kept in the panic message). A watchdog process stops the
/// server when this test binary is gone, however it ends.
fn launch(l: &Launch) -> Launched {
    let mut failures = Vec::new();
    for _ in 0..3 {
        let port = free_base_port();
        let run = std::env::temp_dir().join(format!(
            "fieldguard-{}-{}-{port}",
            l.env.to_lowercase(),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&run);
        std::fs::create_dir_all(&run).unwrap();
        let o = Command::new("bash")
            .arg(l.start)
            .env(format!("{}_OUT", l.env), l.out)
            .env(format!("{}_RUN", l.env), &run)
            .env(format!("{}_PORT", l.env), port.to_string())
            .output()
            .unwrap();
        if o.status.success() {
            let kubeconfig = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            watchdog(&run, l.stop);
            return Launched {
                run,
                kubeconfig,
                port,
            };
        }
        let failure = String::from_utf8_lossy(&o.stderr).into_owned();
        eprintln!("{} did not start on port {port}: {failure}", l.what);
        failures.push(failure);
        let _ = Command::new("bash").arg(l.stop).arg(&run).status();
        let _ = std::fs::remove_dir_all(&run);
    }
    panic!(
        "{} did not start (3 tries):\n{}",
        l.what,
        failures.join("\n---\n")
    );
}

/// Hands a started server to a watchdog that stops it when this test binary is gone.
fn watchdog(run: &Path, stop: &Path) {
    let status = Command::new("bash")
        .arg("-c")
        .arg(
            r#"( while kill -0 "$FG_PID" 2>/dev/null; do sleep 0.5; done; bash "$FG_STOP" "$FG_RUN"; rm -rf "$FG_RUN" ) >/dev/null 2>&1 </dev/null &"#,
        )
        .env("FG_PID", std::process::id().to_string())
        .env("FG_STOP", stop)
        .env("FG_RUN", run)
        .status()
        .unwrap();
    assert!(status.success(), "the watchdog did not start");
}

impl RealApi {
    /// Where clients connect.
    pub fn addr(&self) -> std::net::SocketAddr {
        ([127, 0, 0, 1], self.client).into()
    }

    /// A kubeconfig like the server's that reaches it through `addr` instead (a proxy).
    pub fn kubeconfig_via(&self, addr: std::net::SocketAddr) -> PathBuf {
        let text = std::fs::read_to_string(&self.kubeconfig).unwrap();
        let direct = format!("https://127.0.0.1:{}", self.client);
        assert!(text.contains(&direct), "kubeconfig without {direct}");
        let path = self.run.join(format!("kubeconfig-via-{}", addr.port()));
        std::fs::write(&path, text.replace(&direct, &format!("https://{addr}"))).unwrap();
        path
    }

    /// A client of `kubeconfig` as `admin`.
    pub async fn api_of(kubeconfig: &Path) -> Api {
        let opts = fieldguard::live::api::ClusterOptions {
            kubeconfig: Some(kubeconfig.to_path_buf()),
            context: Some("admin".into()),
        };
        Api::connect(&opts).await.unwrap().0
    }

    /// Kills the apiserver process and starts it again on the same etcd (its data kept),
    /// with `extra` appended to its command line (a later flag wins); returns when it answers
    /// where clients connect again. Every watch on it ends; its watch cache starts afresh.
    pub async fn restart_apiserver(&self, extra: &[&str]) {
        let pid_file = self.run.join("apiserver.pid");
        let pid = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .to_string();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let mut args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let program = args.remove(0);
        args.extend(extra.iter().map(|a| a.to_string()));
        // Killed, as a crash or an OOM kill would: a graceful stop waits up to a minute for
        // the watches it serves to end.
        let status = Command::new("kill")
            .arg("-KILL")
            .arg(&pid)
            .status()
            .unwrap();
        assert!(status.success(), "kill {pid}");
        // Gone when its port refuses connections: a killed process's threads can outlive
        // its main thread (a zombie already) and hold the listening socket a moment longer.
        let gone = std::time::Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port + 2)).is_ok() {
            assert!(
                std::time::Instant::now() < gone,
                "apiserver {pid} did not stop"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Started in the background by a shell, as start.sh does (not this binary's child:
        // nobody here waits for it; the watchdog stops it by its pid file).
        let o = Command::new("bash")
            .arg("-c")
            .arg(r#"log=$1; shift; "$@" >>"$log" 2>&1 </dev/null & echo $!"#)
            .arg("restart")
            .arg(self.run.join("apiserver.log"))
            .arg(&program)
            .args(&args)
            .output()
            .unwrap();
        assert!(o.status.success(), "restarting the apiserver");
        std::fs::write(&pid_file, &o.stdout).unwrap();
        let api = self.api().await;
        let ready = std::time::Instant::now() + Duration::from_secs(120);
        // Ready when every CRD's resources are served again (the server serves them only
        // once its CRD informer has synced).
        loop {
            let crds = api
                .get_text(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    "application/json",
                )
                .await;
            let mut waiting = vec![format!("{crds:?}")];
            if let Ok(Some(text)) = &crds
                && let Ok(list) = serde_json::from_str::<Value>(text)
                && let Some(items) = list["items"].as_array()
            {
                waiting.clear();
                for crd in items {
                    let spec = &crd["spec"];
                    for v in spec["versions"].as_array().into_iter().flatten() {
                        let path = format!(
                            "/apis/{}/{}/{}?limit=1",
                            spec["group"].as_str().unwrap_or(""),
                            v["name"].as_str().unwrap_or(""),
                            spec["names"]["plural"].as_str().unwrap_or("")
                        );
                        if !matches!(api.get_text(&path, "application/json").await, Ok(Some(_))) {
                            waiting.push(path);
                        }
                    }
                }
                if waiting.is_empty() {
                    return;
                }
            }
            if std::time::Instant::now() > ready {
                panic!(
                    "the restarted apiserver does not serve {waiting:?}; its log ends:\n{}",
                    self.log_tail("apiserver", 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Compacts etcd's history up to its current revision (through etcd's JSON gateway):
    /// every older resourceVersion is gone, and a watch from one is refused with `410 Gone`.
    /// Returns the revision.
    pub fn compact_etcd(&self) -> i64 {
        let rev = self.etcd_post(
            "/v3/kv/range",
            r#"{"key":"Lw==","range_end":"MA==","count_only":true}"#,
        )["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse::<i64>().ok())
            .expect("etcd's revision");
        self.etcd_post(
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{rev}","physical":true}}"#),
        );
        rev
    }

    fn etcd_post(&self, path: &str, body: &str) -> Value {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(
            s,
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, json) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        assert!(
            head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
            "etcd {path}: {text}"
        );
        serde_json::from_str(json).unwrap_or_else(|e| panic!("etcd {path}: {e}: {json}"))
    }

    /// A client as the `admin` context (allowed everything).
    pub async fn api(&self) -> fieldguard::live::api::Api {
        self.api_as("admin").await
    }

    /// The end of one of the server's logs (`apiserver`, `etcd`, `controller-manager`).
    pub fn log_tail(&self, which: &str, lines: usize) -> String {
        let log =
            std::fs::read_to_string(self.run.join(format!("{which}.log"))).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// A client of the given context (`admin` and `viewer`; on kube-apiserver also `alice`).
    pub async fn api_as(&self, context: &str) -> fieldguard::live::api::Api {
        let opts = fieldguard::live::api::ClusterOptions {
            kubeconfig: Some(self.kubeconfig.clone()),
            context: Some(context.into()),
        };
        fieldguard::live::api::Api::connect(&opts).await.unwrap().0
    }
}

/// A write's answer: the stored object, or the apiserver's refusal.
pub type Answer = Result<Value, Refusal>;

/// A refusal: code, message, and the causes (field, reason, message), sorted.
#[derive(Debug)]
pub struct Refusal {
    pub code: u16,
    pub message: String,
    pub causes: Vec<(String, String, String)>,
}

pub async fn write(
    api: &Api,
    method: http::Method,
    url: &str,
    ctype: &str,
    body: &Value,
) -> Answer {
    match api
        .write(method, url, ctype, body.to_string().into_bytes())
        .await
    {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap()),
        Err(Ok(status)) => {
            let mut causes: Vec<(String, String, String)> = status
                .details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.field, c.reason, c.message))
                .collect();
            causes.sort();
            Err(Refusal {
                code: status.code,
                message: status.message,
                causes,
            })
        }
        Err(Err(e)) => panic!("transport: {e}"),
    }
}

/// Creates namespace `name` (kube-apiserver; the apiextensions tier serves none).
pub async fn create_namespace(api: &Api, name: &str) {
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    write(
        api,
        http::Method::POST,
        "/api/v1/namespaces",
        "application/json",
        &ns,
    )
    .await
    .unwrap_or_else(|e| panic!("creating namespace {name}: {e:?}"));
}

/// GETs JSON; `None` on 404.
pub async fn get(api: &Api, path: &str) -> Option<Value> {
    api.get_text(path, "application/json")
        .await
        .unwrap()
        .map(|t| serde_json::from_str(&t).unwrap())
}

/// Creates (or replaces) a CRD on the server and waits until it is established and its schema
/// is published at `/openapi/v3`.
pub async fn install_crd(api: &Api, yaml: &str) {
    let crd: Value = serde_json::from_str(&fieldguard::value::json::to_string(
        &fieldguard::value::yaml::parse_one(yaml).unwrap(),
        fieldguard::value::json::Style::PLAIN,
    ))
    .unwrap();
    let created = write(
        api,
        http::Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        &crd,
    )
    .await;
    if let Err(r) = &created {
        assert_eq!(r.code, 409, "creating the CRD: {r:?}");
    }
    let name = crd["metadata"]["name"].as_str().unwrap();
    let gvs: Vec<String> = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            format!(
                "apis/{}/{}",
                crd["spec"]["group"].as_str().unwrap(),
                v["name"].as_str().unwrap()
            )
        })
        .collect();
    let until = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let c = get(
            api,
            &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
        )
        .await
        .unwrap_or_default();
        let established = c["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        });
        // Each group-version's document lists the kind (the index already lists a
        // group-version whose other CRDs are installed).
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap();
        let mut published = true;
        for gv in &gvs {
            // (An unpublished group-version's document is an empty answer, not a 404.)
            let doc = api
                .get_text(&format!("/openapi/v3/{gv}"), "application/json")
                .await
                .unwrap()
                .unwrap_or_default();
            published &= doc.contains(&format!("\"kind\":\"{kind}\""));
        }
        if established && published {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "CRD {name} not established and published"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Installs the CRD of `tests/data/realapi/FILE` ([`install_crd`]).
pub async fn install_crd_file(api: &Api, file: &str) {
    let path = root().join("tests/data/realapi").join(file);
    install_crd(api, &std::fs::read_to_string(path).unwrap()).await;
}

/// Module `key`'s real apiserver ([`shared_server`]) with the CRD of `tests/data/realapi/FILE`
/// installed, and the catalog a `check` against it would build for `group_versions`
/// (comma-separated; `None`: the real tier is not built and not required).
pub async fn with_crd(
    key: &'static str,
    file: &str,
    group_versions: &str,
) -> Option<(fieldguard::live::api::Api, fieldguard::catalog::Catalog)> {
    let server = shared_server(key)?;
    let api = server.api().await;
    install_crd_file(&api, file).await;
    let catalog = api
        .catalog_for(&group_versions.split(',').map(String::from).collect())
        .await
        .unwrap();
    Some((api, catalog))
}

/// Deletes the object at `url` (gone already is fine).
pub async fn delete(api: &Api, url: &str) {
    let _ = write(
        api,
        http::Method::DELETE,
        url,
        "application/json",
        &serde_json::json!({}),
    )
    .await;
}
