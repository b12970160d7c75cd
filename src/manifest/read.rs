//! Reading inputs within their [`Limits`]: files named, directories searched (recursively, in
//! name order, following symbolic links once: a directory met twice is a loop, reported, not
//! followed), standard input. Sizes are known before reading where the file system says them
//! and are enforced while reading otherwise: nothing reads more than its limit and one byte.
//!
//! Only regular files are read from directories; FIFOs, devices and sockets there are
//! reported. Named on the command line they are read (process substitution hands a pipe),
//! with the same limit — a FIFO is opened without waiting for a writer, so one that nobody
//! writes to reads as empty instead of blocking forever.

use super::limits::{Limit, Limits, over};
use super::{FileBytes, Input, ManifestError};
use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Reader<'l> {
    limits: &'l Limits,
    /// Bytes read so far, every input together.
    total: u64,
    /// Directories entered, by device and inode.
    visited: HashSet<(u64, u64)>,
    files: Vec<FileBytes>,
    errors: Vec<ManifestError>,
}

impl Reader<'_> {
    fn fail(&mut self, name: &Arc<str>, message: String) {
        self.errors.push(ManifestError {
            file: name.clone(),
            doc: None,
            line: None,
            path: None,
            message,
        });
    }

    /// What the next file may hold: the file limit, or what is left of the total.
    fn allowance(&self) -> (u64, Limit) {
        let left = self.limits.total_bytes.saturating_sub(self.total);
        if left < self.limits.file_bytes {
            (left, Limit::Total)
        } else {
            (self.limits.file_bytes, Limit::File)
        }
    }

    fn refuse(&self, limit: Limit) -> String {
        let value = match limit {
            Limit::Total => self.limits.total_bytes,
            _ => self.limits.file_bytes,
        };
        let what = if limit == Limit::Total {
            "the inputs together are "
        } else {
            ""
        };
        format!("{what}{}", over(limit, value))
    }

    /// Reads `r` up to the allowance; a refusal when there is more. `size`: what the file
    /// system says it holds (read in one call when it is right).
    fn read_capped(&mut self, name: Arc<str>, r: &mut dyn Read, size: u64) {
        let (cap, limit) = self.allowance();
        let mut bytes = Vec::with_capacity(size.min(cap) as usize + 1);
        match r.take(cap + 1).read_to_end(&mut bytes) {
            Ok(n) if n as u64 > cap => {
                let msg = self.refuse(limit);
                self.fail(&name, msg);
            }
            Ok(n) => {
                self.total += n as u64;
                self.files.push((name, bytes));
            }
            Err(e) => self.fail(&name, format!("cannot read: {e}")),
        }
    }

    fn walk(&mut self, p: &Path, named: bool) {
        let name: Arc<str> = Arc::from(p.display().to_string());
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) => return self.fail(&name, format!("cannot read: {e}")),
        };
        let ft = meta.file_type();
        if ft.is_dir() {
            if !self.visited.insert((meta.dev(), meta.ino())) {
                return self.fail(
                    &name,
                    "this directory was already read (a symbolic link loop?): not read again"
                        .into(),
                );
            }
            let mut entries: Vec<PathBuf> = match std::fs::read_dir(p) {
                Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
                Err(e) => return self.fail(&name, format!("cannot read: {e}")),
            };
            entries.sort();
            for e in entries {
                self.walk(&e, false);
            }
            return;
        }
        if !named {
            let manifest_like = p
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"));
            if !manifest_like {
                return;
            }
            if !ft.is_file() {
                return self.fail(
                    &name,
                    format!(
                        "not a regular file ({}): name it on the command line to read it",
                        kind_of(&ft)
                    ),
                );
            }
        }
        if ft.is_file() {
            let (cap, limit) = self.allowance();
            if meta.len() > cap {
                let msg = format!("file is {} bytes, {}", meta.len(), self.refuse(limit));
                return self.fail(&name, msg);
            }
        }
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        if ft.is_fifo() {
            // Opening a FIFO for reading waits for a writer; this does not.
            opts.custom_flags(libc::O_NONBLOCK);
        }
        let mut file = match opts.open(p) {
            Ok(f) => f,
            Err(e) => return self.fail(&name, format!("cannot read: {e}")),
        };
        if ft.is_fifo() {
            // Reads block again (until data, or the end when every writer is gone).
            use std::os::fd::AsRawFd;
            let fd = file.as_raw_fd();
            // SAFETY: fcntl on a descriptor this function owns, with integer arguments.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
                }
            }
        }
        let size = if ft.is_file() { meta.len() } else { 0 };
        self.read_capped(name, &mut file, size);
    }
}

fn kind_of(ft: &std::fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// The files the inputs name (directories expanded), read within `limits` but not parsed.
pub fn read_files(
    inputs: &[Input],
    stdin: &mut dyn Read,
    limits: &Limits,
) -> (Vec<FileBytes>, Vec<ManifestError>) {
    let mut r = Reader {
        limits,
        total: 0,
        visited: HashSet::new(),
        files: Vec::new(),
        errors: Vec::new(),
    };
    for input in inputs {
        match input {
            Input::Stdin => r.read_capped(Arc::from("<stdin>"), stdin, 0),
            Input::Path(p) => r.walk(p, true),
        }
    }
    (r.files, r.errors)
}
