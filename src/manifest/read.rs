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
use super::{FileBytes, FileStamp, Input, ManifestError};
use std::collections::HashSet;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Reader<'l> {
    limits: &'l Limits,
    /// Bytes read so far, every input together.
    total: u64,
    files: Vec<FileBytes>,
    errors: Vec<ManifestError>,
}

/// Searches the inputs for files, in order, reading nothing.
#[derive(Default)]
struct Planner {
    /// Directories entered, by device and inode.
    visited: HashSet<(u64, u64)>,
    plan: Vec<Step>,
}

/// One step of reading the inputs, in order: what was found while searching them, before
/// anything is read.
pub(super) enum Step {
    Stdin,
    /// A file: `size` for a regular file, as the file system says it (and the rest of what it
    /// says, `stamp`).
    File {
        name: Arc<str>,
        path: PathBuf,
        size: Option<u64>,
        stamp: Option<FileStamp>,
    },
    /// A problem found while searching (reported where it was found, in order).
    Fail {
        name: Arc<str>,
        message: String,
    },
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

    /// Takes one step of a plan.
    fn take(&mut self, step: &Step, stdin: &mut dyn Read) {
        let (name, path, size) = match step {
            Step::Stdin => return self.read_capped(Arc::from("<stdin>"), stdin, 0),
            Step::Fail { name, message } => return self.fail(name, message.clone()),
            Step::File {
                name, path, size, ..
            } => (name.clone(), path, *size),
        };
        // What is opened is what is read: a file replaced since it was planned is judged as
        // it is now, and never waited on.
        let (mut file, meta) = match open_without_waiting(path) {
            Ok(opened) => opened,
            Err(e) => return self.fail(&name, format!("cannot read: {e}")),
        };
        let ft = meta.file_type();
        if size.is_some() && !ft.is_file() {
            let msg = format!(
                "not a regular file ({}) any more: it changed while the inputs were read",
                kind_of(&ft)
            );
            return self.fail(&name, msg);
        }
        let size = ft.is_file().then_some(meta.len());
        if let Some(size) = size {
            let (cap, limit) = self.allowance();
            if size > cap {
                let msg = format!("file is {size} bytes, {}", self.refuse(limit));
                return self.fail(&name, msg);
            }
        }
        if !ft.is_file() {
            // Reads block again (a FIFO's until data, or the end when every writer is gone).
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
        self.read_capped(name, &mut file, size.unwrap_or(0));
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

impl Planner {
    /// Plans the reading of `p` and what it holds (a directory: its manifest files, in name
    /// order); `named`: given on the command line.
    fn walk(&mut self, p: &Path, named: bool) {
        let name: Arc<str> = Arc::from(p.display().to_string());
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) => return self.plan_failure(name, format!("cannot read: {e}")),
        };
        let ft = meta.file_type();
        if ft.is_dir() {
            if !self.visited.insert((meta.dev(), meta.ino())) {
                return self.plan_failure(
                    name,
                    "this directory was already read (a symbolic link loop?): not read again"
                        .into(),
                );
            }
            let mut entries: Vec<(std::ffi::OsString, PathBuf, Option<Metadata>)> =
                match std::fs::read_dir(p) {
                    Ok(rd) => rd
                        .filter_map(|e| {
                            let e = e.ok()?;
                            let path = e.path();
                            let meta = match e.file_type() {
                                // A file of another name: passed by, unread.
                                Ok(ft) if ft.is_file() && !manifest_like(&path) => return None,
                                Ok(ft) if ft.is_file() => e.metadata().ok(),
                                // A directory, a link (followed), anything else: by its path.
                                _ => None,
                            };
                            Some((e.file_name(), path, meta))
                        })
                        .collect(),
                    Err(e) => return self.plan_failure(name, format!("cannot read: {e}")),
                };
            // By name: the order of their paths (one directory), without comparing the
            // directory's components again for every pair.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (_, e, meta) in entries {
                match meta {
                    Some(meta) => self.file(&e, false, &meta),
                    None => self.walk(&e, false),
                }
            }
            return;
        }
        self.file(p, named, &meta)
    }

    /// Plans the reading of `p`, not a directory, whose metadata (links followed) is `meta`.
    fn file(&mut self, p: &Path, named: bool, meta: &Metadata) {
        if !named && !manifest_like(p) {
            return;
        }
        let name: Arc<str> = Arc::from(p.display().to_string());
        let ft = meta.file_type();
        if !named && !ft.is_file() {
            let message = format!(
                "not a regular file ({}): name it on the command line to read it",
                kind_of(&ft)
            );
            return self.plan_failure(name, message);
        }
        self.plan.push(Step::File {
            name,
            path: p.to_path_buf(),
            size: ft.is_file().then_some(meta.len()),
            stamp: ft.is_file().then(|| FileStamp::of(meta)),
        });
    }

    fn plan_failure(&mut self, name: Arc<str>, message: String) {
        self.plan.push(Step::Fail { name, message });
    }
}

/// A file of a directory that names a manifest (`.yaml`, `.yml`, `.json`).
fn manifest_like(p: &Path) -> bool {
    p.extension()
        .and_then(|x| x.to_str())
        .is_some_and(|x| matches!(x, "yaml" | "yml" | "json"))
}

/// The files the inputs name (directories expanded), read within `limits` but not parsed.
pub fn read_files(
    inputs: &[Input],
    stdin: &mut dyn Read,
    limits: &Limits,
) -> (Vec<FileBytes>, Vec<ManifestError>) {
    read_planned(&plan(inputs), stdin, limits)
}

/// The steps of reading the inputs: directories searched, nothing read yet.
pub(super) fn plan(inputs: &[Input]) -> Vec<Step> {
    let mut r = Planner::default();
    for input in inputs {
        match input {
            Input::Stdin => r.plan.push(Step::Stdin),
            Input::Path(p) => r.walk(p, true),
        }
    }
    r.plan
}

/// Takes the steps in order, within `limits`.
pub(super) fn read_planned(
    steps: &[Step],
    stdin: &mut dyn Read,
    limits: &Limits,
) -> (Vec<FileBytes>, Vec<ManifestError>) {
    let mut r = Reader::new(limits);
    for step in steps {
        r.take(step, stdin);
    }
    (r.files, r.errors)
}

/// A regular file's bytes, if it holds `size` of them (else it changed since it was planned,
/// or cannot be read).
///
/// Usually one `read` of a buffer one byte larger than the file: a file that grew fills it, one
/// that shrank reads short and then hits its end, and what is no longer a regular file reads
/// nothing (a FIFO, opened without waiting), fails (a directory) or fills it (a device). No
/// `fstat` and no read of the end: on these virtual machines each system call costs
/// microseconds, and a snapshot is thousands of small files (`std`'s `read_to_end` reads at most
/// 8 KiB at first, then once more to find the end: three reads of a 9 KB file).
pub(super) fn read_exactly(path: &Path, size: u64) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    read_exactly_into(path, size, &mut bytes).then_some(bytes)
}

/// [`read_exactly`] into `bytes` (its room kept from one file to the next: memory touched once,
/// and still in the cache when the file is parsed); false, `bytes` unspecified, on failure.
pub(super) fn read_exactly_into(path: &Path, size: u64, bytes: &mut Vec<u8>) -> bool {
    let Ok(mut file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    let Some(room) = usize::try_from(size).ok().and_then(|n| n.checked_add(1)) else {
        return false;
    };
    bytes.clear();
    // Zeroed: fresh memory from the allocator is zero already, so this is rarely a `memset`.
    bytes.resize(room, 0);
    let len = room - 1;
    let mut filled = 0;
    loop {
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if filled >= len {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    // Short (it shrank), or the spare byte filled (it grew).
    if filled != len {
        return false;
    }
    bytes.truncate(len);
    true
}

/// Opens `path` for reading without waiting for a writer (a FIFO waits for one otherwise),
/// with what the file system says of what was opened.
fn open_without_waiting(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

impl<'l> Reader<'l> {
    fn new(limits: &'l Limits) -> Reader<'l> {
        Reader {
            limits,
            total: 0,
            files: Vec::new(),
            errors: Vec::new(),
        }
    }
}
