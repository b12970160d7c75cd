//! The JSON-lines sink: every transition appended to a file, one JSON object per line, so
//! history survives a restart and can be shipped to a log pipeline. Writes go through a
//! bounded queue to a writer thread (the watch loop never waits on the disk; when the queue is
//! full the line is dropped and counted). The file is bounded: past `max_bytes` it is renamed
//! to `FILE.1` (replacing the previous one) and a new file is started. On start, the tail of
//! both files is read back into memory.

use super::Transition;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Lines waiting for the writer at most.
const QUEUE: usize = 8192;

/// An open sink.
pub struct Sink {
    tx: std::sync::mpsc::SyncSender<Msg>,
    /// Lines dropped because the writer fell behind, or failed writes.
    pub dropped: Arc<AtomicU64>,
}

enum Msg {
    Line(String),
    Flush(std::sync::mpsc::SyncSender<()>),
}

impl Sink {
    /// Opens (creates) `path` for appending.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Sink, String> {
        let file = open_append(path)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Msg>(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let d = dropped.clone();
        let path = path.to_path_buf();
        std::thread::Builder::new()
            .name("history-sink".into())
            .spawn(move || write_loop(path, file, max_bytes, rx, d))
            .map_err(|e| format!("history sink: {e}"))?;
        Ok(Sink { tx, dropped })
    }

    /// Queues one transition.
    pub fn write(&self, t: &Transition) {
        let line = match serde_json::to_string(t) {
            Ok(l) => l,
            Err(_) => return,
        };
        if self.tx.try_send(Msg::Line(line)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Waits until every queued line is written and flushed (bounded: 10 s).
    pub fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv_timeout(std::time::Duration::from_secs(10));
        }
    }
}

fn open_append(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("history sink {}: {e}", path.display()))
}

fn rotated(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

fn write_loop(
    path: PathBuf,
    file: std::fs::File,
    max_bytes: u64,
    rx: std::sync::mpsc::Receiver<Msg>,
    dropped: Arc<AtomicU64>,
) {
    let mut size = file.metadata().map_or(0, |m| m.len());
    let mut out = std::io::BufWriter::new(file);
    let mut next = rx.recv().ok();
    while let Some(msg) = next {
        match msg {
            Msg::Line(line) => {
                if size + line.len() as u64 + 1 > max_bytes && size > 0 {
                    let _ = out.flush();
                    match std::fs::rename(&path, rotated(&path))
                        .and_then(|_| open_append(&path).map_err(std::io::Error::other))
                    {
                        Ok(f) => {
                            out = std::io::BufWriter::new(f);
                            size = 0;
                        }
                        Err(e) => {
                            tracing::warn!(path = %path.display(), error = %e, "history sink: rotation failed")
                        }
                    }
                }
                if writeln!(out, "{line}").is_err() {
                    dropped.fetch_add(1, Ordering::Relaxed);
                } else {
                    size += line.len() as u64 + 1;
                }
            }
            Msg::Flush(done) => {
                let _ = out.flush();
                let _ = done.send(());
            }
        }
        // Written out whenever the queue runs dry: a crash loses at most what was queued.
        next = match rx.try_recv() {
            Ok(m) => Some(m),
            Err(std::sync::mpsc::TryRecvError::Empty) => {
                let _ = out.flush();
                rx.recv().ok()
            }
            Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
        };
    }
    let _ = out.flush();
}

/// The last `keep` transitions of `cluster` in the sink's files (the rotated one first),
/// oldest first; lines that cannot be read are counted and skipped.
pub fn load(path: &Path, cluster: &str, keep: usize) -> (Vec<Transition>, usize) {
    let mut out: std::collections::VecDeque<Transition> = std::collections::VecDeque::new();
    let mut bad = 0;
    for p in [rotated(path), path.to_path_buf()] {
        let Ok(f) = std::fs::File::open(&p) else {
            continue;
        };
        for line in std::io::BufReader::new(f).lines() {
            let Ok(line) = line else {
                bad += 1;
                break;
            };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Transition>(&line) {
                Ok(t) if *t.cluster == *cluster => {
                    out.push_back(t);
                    if out.len() > keep {
                        out.pop_front();
                    }
                }
                Ok(_) => {}
                Err(_) => bad += 1,
            }
        }
    }
    (out.into(), bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Change;

    fn t(seq: u64, cluster: &str) -> Transition {
        Transition {
            seq,
            cluster: cluster.into(),
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: format!("cm-{seq}").into(),
            path: ".data.k".into(),
            change: Change::TakenOver,
            from: vec!["a".into()].into(),
            to: vec!["b".into()].into(),
            operation: "Apply".into(),
            subresource: "".into(),
            resource_version: seq.to_string().into(),
            time: Some(1),
            observed: 2,
            old_value: Some("\"x\"".into()),
            new_value: Some("\"y\"".into()),
            fields: 0,
        }
    }

    #[test]
    fn written_rotated_and_read_back() {
        let path =
            std::env::temp_dir().join(format!("fieldguard-sink-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(rotated(&path));
        // Room for about four lines per file.
        let line = serde_json::to_string(&t(10, "prod")).unwrap().len() as u64 + 1;
        let sink = Sink::open(&path, line * 4 + 2).unwrap();
        for seq in 1..=10 {
            sink.write(&t(seq, if seq == 5 { "other" } else { "prod" }));
        }
        sink.flush();
        assert!(std::fs::metadata(&path).unwrap().len() <= line * 4 + 2);
        assert!(rotated(&path).exists());
        // Lines 1..=4 went with the second rotation; what both files keep comes back in order.
        let (back, bad) = load(&path, "prod", 100);
        assert_eq!(bad, 0);
        let seqs: Vec<u64> = back.iter().map(|t| t.seq).collect();
        // FILE.1 holds 5..=8 (5 is another cluster's), FILE 9 and 10.
        assert_eq!(seqs, [6, 7, 8, 9, 10]);
        assert_eq!(back.last(), Some(&t(10, "prod")));
        let (tail, _) = load(&path, "prod", 2);
        assert_eq!(tail.iter().map(|t| t.seq).collect::<Vec<_>>(), [9, 10]);
        // A torn line is skipped and counted.
        std::fs::write(&path, "{\"seq\": 1, \"clu\n").unwrap();
        assert_eq!(load(&path, "prod", 100).1, 1);
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(rotated(&path));
    }
}
