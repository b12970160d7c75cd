//! Reading and parsing on every core: many files, or one long YAML stream, split into
//! contiguous chunks that threads take as they come free ([`map_chunks`]), joined in input
//! order, so the result is the one a single thread gives.

use super::read::{self, Step};
use super::{DiskFile, Loaded, SharedFile, parse_on_disk, parse_shared, split};
use crate::cores::{chunk_len, cores, map_chunks};
use crate::value::yaml::{YamlDoc, YamlError, YamlOptions, parse_documents};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Streams with at least this many documents are parsed on every core.
const PARALLEL_CHUNKS: usize = 64;

/// The chunks of a long stream parsed ahead on every core, in order; `None` for a chunk left
/// to the caller (over `document_bytes`, or its parse panicked), and an empty list for a short
/// stream (the caller parses each chunk as it goes).
pub(super) fn parse_chunks(
    text: &str,
    chunks: &[split::Chunk],
    opts: &YamlOptions,
    document_bytes: u64,
) -> Vec<Option<Result<Vec<YamlDoc>, YamlError>>> {
    if chunks.len() < PARALLEL_CHUNKS || cores() < 2 {
        return Vec::new();
    }
    let len = chunk_len(chunks.len());
    let parsed = map_chunks(chunks, len, cores(), |run| {
        run.iter()
            .map(|c| {
                let part = &text[c.start..c.end];
                (part.len() as u64 <= document_bytes).then(|| parse_documents(part, opts))
            })
            .collect::<Vec<_>>()
    });
    // A chunk whose parse panicked is left to the caller.
    parsed
        .into_iter()
        .zip(chunks.chunks(len))
        .flat_map(|(done, run)| match done {
            Ok(docs) => docs,
            Err(_) => run.iter().map(|_| None).collect(),
        })
        .collect()
}

/// Reads and parses the planned files on every core, a chunk of files at a time: the
/// files when the plan holds only regular files within `out`'s limits and each read as the
/// size the file system gave (else `None`: the caller reads them in order, one at a time),
/// and with them their parse, as [`parse_files`] gives it.
pub(super) fn read_and_parse(
    steps: &[Step],
    out: &Loaded,
) -> Option<(Vec<SharedFile>, Option<Loaded>)> {
    let mut files = Vec::with_capacity(steps.len());
    for step in steps {
        match step {
            Step::File {
                name,
                path,
                size: Some(size),
                stamp: Some(stamp),
            } if *size <= out.limits.file_bytes => files.push((name, path, *size, *stamp)),
            _ => return None,
        }
    }
    let total: u64 = files.iter().map(|(_, _, size, _)| size).sum();
    if total > out.limits.total_bytes {
        return None;
    }
    // A file that did not read as planned ends every chunk: the caller reads them all again.
    let failed = AtomicBool::new(false);
    let read = on_chunks(&files, |run| {
        let mut part = part_of(out);
        // The files' buffers, kept for a parse in order if one is needed (none kept when the
        // objects stay on disk: every file is then read into the same room).
        let mut read = Vec::with_capacity(if out.json_on_disk { 0 } else { run.len() });
        let mut room = Vec::new();
        for &(name, path, size, stamp) in run {
            if failed.load(Ordering::Relaxed) {
                return None;
            }
            if out.json_on_disk {
                if !read::read_exactly_into(path, size, &mut room) {
                    failed.store(true, Ordering::Relaxed);
                    return None;
                }
                let file = Arc::new(DiskFile {
                    path: path.clone(),
                    stamp,
                });
                parse_on_disk(name, &room, &file, &mut part);
                continue;
            }
            let Some(bytes) = read::read_exactly(path, size) else {
                failed.store(true, Ordering::Relaxed);
                return None;
            };
            let bytes = bytes::Bytes::from(bytes);
            parse_shared(name, &bytes, &mut part);
            read.push((name.clone(), bytes));
        }
        Some((part, read))
    })?;
    let (parts, read): (Vec<Loaded>, Vec<Vec<SharedFile>>) = read.into_iter().unzip();
    let joined = joined(parts, out);
    if out.json_on_disk {
        // Nothing kept to parse again in order: a problem anywhere and the caller reads the
        // files again, as one thread does, to locate it.
        return Some((Vec::new(), Some(joined?)));
    }
    Some((read.into_iter().flatten().collect(), joined))
}

/// Parses many files on every core: contiguous chunks of files, joined in input order. Only a
/// clean outcome is taken: when any chunk finds a problem, or the chunks together hold more
/// documents than `out`'s limits allow, `None` — the caller parses the files again in order,
/// so errors, limits and where reading stopped are exactly those of one pass.
pub(super) fn parse_files(files: &[SharedFile], out: &Loaded) -> Option<Loaded> {
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if total > out.limits.total_bytes {
        return None;
    }
    let parsed = on_chunks(files, |run| {
        let mut part = part_of(out);
        for (name, b) in run {
            parse_shared(name, b, &mut part);
        }
        Some(part)
    })?;
    joined(parsed, out)
}

/// `work` on contiguous chunks of `items`, on every core, the results in the chunks' order;
/// `None` when there are not two chunks to make, or any chunk gives `None` or panics.
fn on_chunks<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(&[T]) -> Option<R> + Sync,
) -> Option<Vec<R>> {
    if cores() < 2 || items.len() < 2 {
        return None;
    }
    map_chunks(items, chunk_len(items.len()), cores(), work)
        .into_iter()
        .map(|r| r.ok().flatten())
        .collect()
}

/// An empty result set up as `out` is, for one chunk.
fn part_of(out: &Loaded) -> Loaded {
    let mut part = Loaded::new(out.limits.clone()).until(out.deadline.clone());
    part.check_identity = out.check_identity;
    part.keep_json = out.keep_json;
    part.json_on_disk = out.json_on_disk;
    part
}

/// The chunks' results in order, if every one is clean and together they are within `out`'s
/// limits.
fn joined(parsed: Vec<Loaded>, out: &Loaded) -> Option<Loaded> {
    let counted: usize = parsed.iter().map(|p| p.counted).sum();
    if counted > out.limits.documents || parsed.iter().any(|p| !p.errors.is_empty() || p.stopped) {
        return None;
    }
    let mut joined = part_of(out);
    joined.counted = counted;
    joined.bytes = parsed.iter().map(|p| p.bytes).sum();
    joined.documents = Vec::with_capacity(parsed.iter().map(|p| p.documents.len()).sum());
    for p in parsed {
        let before = joined.documents.len();
        joined.documents.extend(p.documents);
        joined.json_objects.append(p.json_objects, before);
    }
    Some(joined)
}
