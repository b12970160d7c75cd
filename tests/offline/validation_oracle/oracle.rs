//! The validation oracle (`validation-oracle/`: apiextensions-apiserver 1.36.5's write path as a
//! JSONL filter), one process for a whole run, asked in batches: the lines of a batch are
//! written by a thread while the answers are read, so neither side's pipe fills up.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;

/// The oracle binary: `$VALIDATION_ORACLE` or `.validation-oracle/bin/validation-oracle`
/// (built by `scripts/setup.sh`). Missing: `None` with a printed line, or a failure when
/// `FIELDGUARD_REQUIRE_VALIDATION_ORACLE` is set (as `scripts/test.sh` does).
pub fn binary() -> Option<PathBuf> {
    let p = std::env::var_os("VALIDATION_ORACLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(".validation-oracle/bin/validation-oracle")
        });
    if p.exists() {
        return Some(p);
    }
    assert!(
        std::env::var_os("FIELDGUARD_REQUIRE_VALIDATION_ORACLE").is_none(),
        "validation oracle not found at {} (run scripts/setup.sh)",
        p.display()
    );
    println!(
        "SKIPPED: validation oracle not found at {} (run scripts/setup.sh)",
        p.display()
    );
    None
}

/// A running oracle.
pub struct Oracle {
    child: Child,
    lines: Option<mpsc::Sender<String>>,
    writer: Option<std::thread::JoinHandle<()>>,
    out: BufReader<ChildStdout>,
}

impl Oracle {
    pub fn start(bin: &PathBuf) -> Oracle {
        let mut child = Command::new(bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the validation oracle");
        let mut stdin = child.stdin.take().expect("stdin");
        let (tx, rx) = mpsc::channel::<String>();
        let writer = std::thread::spawn(move || {
            for mut line in rx {
                line.push('\n');
                if stdin.write_all(line.as_bytes()).is_err() {
                    return;
                }
            }
        });
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        Oracle {
            child,
            lines: Some(tx),
            writer: Some(writer),
            out,
        }
    }

    /// The answers to `lines`, in order (each line's `id` is its index in the batch).
    pub fn ask(&mut self, lines: Vec<String>) -> Vec<Value> {
        let n = lines.len();
        let tx = self.lines.as_ref().expect("oracle running");
        for l in lines {
            tx.send(l).expect("oracle writer");
        }
        let mut answers = Vec::with_capacity(n);
        let mut buf = String::new();
        for i in 0..n {
            buf.clear();
            let read = self.out.read_line(&mut buf).expect("read the oracle");
            assert!(read > 0, "the validation oracle exited early");
            let v: Value = serde_json::from_str(&buf)
                .unwrap_or_else(|e| panic!("oracle answer is not JSON ({e}): {buf}"));
            assert_eq!(v["id"], i, "oracle answer out of order: {buf}");
            answers.push(v);
        }
        answers
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.child.kill();
        }
        self.lines.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        let _ = self.child.wait();
    }
}
