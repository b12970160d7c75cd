//! Reading and parsing on every core: many files, or one long YAML stream, split into
//! contiguous runs (one per thread) and joined in input order, so the result is the one a single
//! thread gives.

use super::read::{self, Step};
use super::{Loaded, SharedFile, parse_shared, split};
use crate::value::yaml::{YamlDoc, YamlError, YamlOptions, parse_documents};
use std::sync::atomic::{AtomicBool, Ordering};

/// Streams with at least this many documents are parsed on every core.
const PARALLEL_CHUNKS: usize = 64;

/// The chunks of a long stream parsed ahead on every core (contiguous runs, one per thread),
/// in order; `None` for a chunk left to the caller (over `document_bytes`), and an empty list
/// for a short stream (the caller parses each chunk as it goes).
pub(super) fn parse_chunks(
    text: &str,
    chunks: &[split::Chunk],
    opts: &YamlOptions,
    document_bytes: u64,
) -> Vec<Option<Result<Vec<YamlDoc>, YamlError>>> {
    if chunks.len() < PARALLEL_CHUNKS || crate::cores::cores() < 2 {
        return Vec::new();
    }
    let per = chunks.len().div_ceil(crate::cores::cores());
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .chunks(per)
            .map(|run| {
                scope.spawn(move || {
                    run.iter()
                        .map(|c| {
                            let part = &text[c.start..c.end];
                            (part.len() as u64 <= document_bytes)
                                .then(|| parse_documents(part, opts))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        // A thread that panicked leaves its chunks to the caller.
        let mut out = Vec::with_capacity(chunks.len());
        for (h, run) in handles.into_iter().zip(chunks.chunks(per)) {
            match h.join() {
                Ok(v) => out.extend(v),
                Err(_) => out.extend(run.iter().map(|_| None)),
            }
        }
        out
    })
}

/// Reads and parses the planned files on every core, each thread reading its own run: the
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
                ..
            } if *size <= out.limits.file_bytes => files.push((name, path, *size)),
            _ => return None,
        }
    }
    let total: u64 = files.iter().map(|(_, _, size)| size).sum();
    if total > out.limits.total_bytes {
        return None;
    }
    let runs = runs(&files, |(_, _, size)| *size)?;
    // A file that did not read as planned ends every run: the caller reads them all again.
    let failed = AtomicBool::new(false);
    let read = on_runs(&runs, |run| {
        let mut part = part_of(out);
        let mut read = Vec::with_capacity(run.len());
        for &(name, path, size) in run {
            if failed.load(Ordering::Relaxed) {
                return None;
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
    Some((read.into_iter().flatten().collect(), joined(parts, out)))
}

/// Parses many files on every core: contiguous runs of files of about equal size, one per
/// thread, joined in input order. Only a clean outcome is taken: when any run finds a problem,
/// or the runs together hold more documents than `out`'s limits allow, `None` — the caller
/// parses the files again in order, so errors, limits and where reading stopped are exactly
/// those of one pass.
pub(super) fn parse_files(files: &[SharedFile], out: &Loaded) -> Option<Loaded> {
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if total > out.limits.total_bytes {
        return None;
    }
    let runs = runs(files, |(_, b)| b.len() as u64)?;
    let parsed = on_runs(&runs, |run| {
        let mut part = part_of(out);
        for (name, b) in run {
            parse_shared(name, b, &mut part);
        }
        Some(part)
    })?;
    joined(parsed, out)
}

/// `work` on each run, one thread per run, the results in the runs' order; `None` when any
/// run gives `None` or its thread panics.
fn on_runs<T: Sync, R: Send>(
    runs: &[&[T]],
    work: impl Fn(&[T]) -> Option<R> + Sync,
) -> Option<Vec<R>> {
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|run| scope.spawn(move || work(run)))
            .collect();
        // Every thread joined, so that a panic in one is its run's `None`, never the scope's.
        let done: Vec<Option<R>> = handles
            .into_iter()
            .map(|h| h.join().ok().flatten())
            .collect();
        done.into_iter().collect()
    })
}

/// `items` in contiguous runs of about equal size, one per core; `None` when there are not
/// two runs to make.
fn runs<T>(items: &[T], size: impl Fn(&T) -> u64) -> Option<Vec<&[T]>> {
    let threads = crate::cores::cores().min(items.len());
    if threads < 2 {
        return None;
    }
    let total: u64 = items.iter().map(&size).sum();
    let share = total / threads as u64 + 1;
    let mut runs: Vec<&[T]> = Vec::with_capacity(threads);
    let (mut start, mut bytes) = (0, 0u64);
    for (i, item) in items.iter().enumerate() {
        bytes += size(item);
        if bytes >= share && runs.len() + 1 < threads {
            runs.push(&items[start..=i]);
            (start, bytes) = (i + 1, 0);
        }
    }
    runs.push(&items[start..]);
    Some(runs)
}

/// An empty result set up as `out` is, for one thread's run.
fn part_of(out: &Loaded) -> Loaded {
    let mut part = Loaded::new(out.limits.clone()).until(out.deadline.clone());
    part.check_identity = out.check_identity;
    part.keep_json = out.keep_json;
    part
}

/// The runs' results in order, if every one is clean and together they are within `out`'s
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
    joined.json_objects = Vec::with_capacity(parsed.iter().map(|p| p.json_objects.len()).sum());
    for p in parsed {
        let before = joined.documents.len();
        joined.documents.extend(p.documents);
        let json = p.json_objects.into_iter().map(|(i, o)| (before + i, o));
        joined.json_objects.extend(json);
    }
    Some(joined)
}
