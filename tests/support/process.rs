//! Processes and ports for tests, without races: a `fieldguard serve` binds port 0 and the test
//! reads the address the kernel chose from the service's own log; "nobody listens here" is a
//! port held bound (so nobody else can take it) but never listening (so connections are
//! refused at once). One-shot commands run through [`run`].

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a served process may take to log its address and readiness: a hang guard only.
const STARTUP: Duration = Duration::from_secs(120);

/// Runs the fieldguard binary once, from the project root, as a user with no kubeconfig, the
/// temporary directory for a home and no field manager in the environment; `stdin`, when
/// given, is written to it (a broken pipe is not an error: a command may stop reading to refuse
/// its input).
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fieldguard"));
    cmd.args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KUBECONFIG")
        .env("HOME", std::env::temp_dir())
        .env_remove("FIELDGUARD_FIELD_MANAGER")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run fieldguard");
    if let Some(bytes) = stdin {
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(bytes);
    }
    child.wait_with_output().unwrap()
}

/// A running `fieldguard serve`.
pub struct Served {
    pub child: Child,
    /// The gRPC address (`127.0.0.1:PORT`).
    pub addr: String,
    /// The metrics address, when `--metrics-listen` was given.
    pub metrics: Option<String>,
    log: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Starts `fieldguard serve ARGS --listen 127.0.0.1:0` (and `--metrics-listen
    /// 127.0.0.1:0` when `metrics`) and returns once its log says it is ready: health
    /// SERVING, every store synced.
    pub fn start(args: &[&str], metrics: bool) -> Served {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fieldguard"));
        cmd.arg("serve")
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if metrics {
            cmd.args(["--metrics-listen", "127.0.0.1:0"]);
        }
        // The address and readiness are read from info lines.
        cmd.env("FIELDGUARD_LOG", "info");
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<String>();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
                drop(l);
                let _ = tx.send(line);
            }
        });
        let (mut addr, mut metrics_addr, mut ready) = (None, None, false);
        let until = Instant::now() + STARTUP;
        while addr.is_none() || (metrics && metrics_addr.is_none()) || !ready {
            let left = until.saturating_duration_since(Instant::now());
            let line = match rx.recv_timeout(left) {
                Ok(l) => l,
                Err(_) => {
                    let _ = child.kill();
                    panic!(
                        "fieldguard serve did not get ready:\n{}",
                        log.lock().unwrap()
                    );
                }
            };
            if line.contains("serving metrics") {
                metrics_addr = log_field(&line, "addr");
            } else if line.contains("listening") || line.contains("serving a snapshot") {
                addr = log_field(&line, "addr");
            } else if line.contains("ready (health SERVING)") {
                ready = true;
            }
        }
        Served {
            child,
            addr: addr.unwrap(),
            metrics: metrics_addr,
            log,
            reader: Some(reader),
        }
    }

    /// Stops it with SIGTERM; its exit status and whole log.
    pub fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let log = self.log.lock().unwrap().clone();
        (exit, log)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A field of a log line, text (`addr=127.0.0.1:1`) or JSON (`"addr":"127.0.0.1:1"`).
fn log_field(line: &str, name: &str) -> Option<String> {
    if let Some(i) = line.find(&format!("\"{name}\":\"")) {
        let rest = &line[i + name.len() + 4..];
        return rest.split('"').next().map(str::to_string);
    }
    let i = line.find(&format!("{name}="))?;
    let rest = &line[i + name.len() + 1..];
    rest.split_whitespace().next().map(str::to_string)
}

/// A loopback port that is bound but never listens: connections to it are refused, and no
/// one else can bind it while the returned socket lives.
pub fn closed_port() -> (socket2::Socket, u16) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    let port = s.local_addr().unwrap().as_socket().unwrap().port();
    (s, port)
}
