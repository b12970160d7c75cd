//! Reading inputs within their [`Limits`]: files named, directories searched (recursively, in
//! name order), standard input. What each path is is known before it is opened: the file
//! system's word on a path named, the directory's on its entries. Sizes are known before
//! reading where the file system says them and are enforced while reading otherwise: nothing
//! reads more than its limit and one byte.
//!
//! A search is bounded: symbolic links are followed to files, and to directories inside the
//! directory named (once: a directory met twice is a loop, reported, not followed); a link to a
//! directory elsewhere (`/proc/self/root` is `/`) is reported, not searched; at most
//! [`MAX_ENTRIES`] entries are visited.
//!
//! Only regular files are read from directories; FIFOs, devices and sockets there are
//! reported. A FIFO named on the command line is read (process substitution hands a pipe),
//! with the same limit — opened without waiting for a writer, so one that nobody writes to
//! reads as empty instead of blocking forever. A device or socket is refused even when named,
//! by what it is, never opened (`/dev/zero` would read until the limit).

use super::limits::{Limit, Limits};
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
    /// Entries of directories met so far (at most [`MAX_ENTRIES`]).
    entries: usize,
    /// The search stopped: too many entries.
    stopped: bool,
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
        let what = if limit == Limit::Total {
            "the inputs together are "
        } else {
            ""
        };
        format!("{what}{}", self.limits.over(limit))
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
        if !ft.is_file() && (size.is_some() || !ft.is_fifo()) {
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

/// Most entries a search of directories visits, every input together: far more than a tree of
/// manifests or a snapshot holds (a snapshot is at most 2,000,000 documents, and `kubectl`
/// prints many to a file), far fewer than a file system's root or `/proc` holds. A search past
/// it is refused, not finished.
const MAX_ENTRIES: usize = 1_000_000;

/// An entry of a directory, by what the directory says it is (no `stat`).
enum Entry {
    /// A regular file named like a manifest, with its metadata when read with the entry.
    File(Option<Metadata>),
    Dir,
    Link,
    /// A FIFO, device or socket named like a manifest.
    Special(std::fs::FileType),
}

impl Planner {
    /// Plans the reading of `p`, named on the command line, and what it holds (a directory:
    /// its manifest files, in name order). What `p` is is known before anything is opened.
    fn named(&mut self, p: &Path) {
        if self.stopped {
            return;
        }
        let name: Arc<str> = Arc::from(p.display().to_string());
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) => return self.plan_failure(name, format!("cannot read: {e}")),
        };
        if !meta.is_dir() {
            return self.file(p, true, &meta);
        }
        // Links inside are followed only to directories inside it, as it resolves.
        match std::fs::canonicalize(p) {
            Ok(root) => self.dir(p, &meta, &root),
            Err(e) => self.plan_failure(name, format!("cannot read: {e}")),
        }
    }

    /// Plans the reading of the directory `p` (metadata `meta`) inside `root`: its manifest
    /// files and directories, in name order.
    fn dir(&mut self, p: &Path, meta: &Metadata, root: &Path) {
        let name: Arc<str> = Arc::from(p.display().to_string());
        if !self.visited.insert((meta.dev(), meta.ino())) {
            return self.plan_failure(
                name,
                "this directory was already read (a symbolic link loop?): not read again".into(),
            );
        }
        let rd = match std::fs::read_dir(p) {
            Ok(rd) => rd,
            Err(e) => return self.plan_failure(name, format!("cannot read: {e}")),
        };
        let mut entries: Vec<(std::ffi::OsString, PathBuf, Entry)> = Vec::new();
        for e in rd {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                self.stopped = true;
                let message = format!(
                    "the directories searched hold more than {MAX_ENTRIES} entries: not searched \
                     further (name the directories of the manifests)"
                );
                return self.plan_failure(name, message);
            }
            let Ok(e) = e else { continue };
            let path = e.path();
            let entry = match e.file_type() {
                // A file of another name: passed by, unread.
                Ok(ft) if !(ft.is_dir() || ft.is_symlink() || manifest_like(&path)) => continue,
                Ok(ft) if ft.is_file() => Entry::File(e.metadata().ok()),
                Ok(ft) if ft.is_dir() => Entry::Dir,
                Ok(ft) if ft.is_symlink() => Entry::Link,
                Ok(ft) => Entry::Special(ft),
                // Unknown: by its path.
                Err(_) => Entry::File(None),
            };
            entries.push((e.file_name(), path, entry));
        }
        // By name: the order of their paths (one directory), without comparing the
        // directory's components again for every pair.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (_, e, entry) in entries {
            if self.stopped {
                return;
            }
            match entry {
                Entry::File(Some(meta)) => self.file(&e, false, &meta),
                Entry::File(None) | Entry::Dir => match std::fs::symlink_metadata(&e) {
                    Ok(meta) if meta.is_dir() => self.dir(&e, &meta, root),
                    Ok(meta) if meta.file_type().is_symlink() => self.link(&e, root),
                    Ok(meta) => self.file(&e, false, &meta),
                    Err(err) => self.plan_failure(path_name(&e), format!("cannot read: {err}")),
                },
                Entry::Link => self.link(&e, root),
                Entry::Special(ft) => self.special(&e, &ft, false),
            }
        }
    }

    /// Plans what the symbolic link `p` in a directory inside `root` leads to: a file (named
    /// like a manifest), or a directory inside `root`. A directory elsewhere (`/` from
    /// `/proc/self/root`, a home directory) is reported, not searched.
    fn link(&mut self, p: &Path, root: &Path) {
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            // A dangling link of another name is passed by like a file of another name.
            Err(_) if !manifest_like(p) => return,
            Err(e) => return self.plan_failure(path_name(p), format!("cannot read: {e}")),
        };
        if !meta.is_dir() {
            return self.file(p, false, &meta);
        }
        match std::fs::canonicalize(p) {
            Ok(target) if target.starts_with(root) => self.dir(p, &meta, root),
            Ok(target) => {
                let message = format!(
                    "a symbolic link to {}, a directory outside {}: not followed (name it to \
                     read it)",
                    target.display(),
                    root.display()
                );
                self.plan_failure(path_name(p), message)
            }
            Err(e) => self.plan_failure(path_name(p), format!("cannot read: {e}")),
        }
    }

    /// Plans the reading of `p`, not a directory, whose metadata (links followed) is `meta`.
    fn file(&mut self, p: &Path, named: bool, meta: &Metadata) {
        if !named && !manifest_like(p) {
            return;
        }
        let ft = meta.file_type();
        if !ft.is_file() {
            return self.special(p, &ft, named);
        }
        self.plan.push(Step::File {
            name: path_name(p),
            path: p.to_path_buf(),
            size: Some(meta.len()),
            stamp: Some(FileStamp::of(meta)),
        });
    }

    /// A file that is not a regular one: a FIFO is read when named (process substitution,
    /// `<(helm template ...)`, hands one), within the same limits; anything else — a device
    /// (`/dev/zero` reads forever), a socket — is refused by what it is, never opened.
    fn special(&mut self, p: &Path, ft: &std::fs::FileType, named: bool) {
        let message = match (ft.is_fifo(), named) {
            (true, true) => {
                return self.plan.push(Step::File {
                    name: path_name(p),
                    path: p.to_path_buf(),
                    size: None,
                    stamp: None,
                });
            }
            (true, false) => format!(
                "not a regular file ({}): name it on the command line to read it",
                kind_of(ft)
            ),
            (false, _) => format!(
                "not a regular file ({}): not read (fieldguard reads files, directories, pipes \
                 and standard input)",
                kind_of(ft)
            ),
        };
        self.plan_failure(path_name(p), message)
    }

    fn plan_failure(&mut self, name: Arc<str>, message: String) {
        self.plan.push(Step::Fail { name, message });
    }
}

/// A path as messages name it.
fn path_name(p: &Path) -> Arc<str> {
    Arc::from(p.display().to_string())
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
            Input::Path(p) => r.named(p),
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
