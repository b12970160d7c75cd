//! Parsing on every core: many files, or one long YAML stream, split into contiguous runs (one
//! per thread) and joined in input order, so the result is the one a single thread gives.

use super::{FileBytes, Loaded, parse_into, split};
use crate::value::yaml::{YamlDoc, YamlError, YamlOptions, parse_documents};

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

/// Parses many files on every core: contiguous runs of files of about equal size, one per
/// thread, joined in input order. Only a clean outcome is taken: when any run finds a problem,
/// or the runs together hold more documents than `out`'s limits allow, `None` — the caller
/// parses the files again in order, so errors, limits and where reading stopped are exactly
/// those of one pass.
pub(super) fn parse_files(files: &[FileBytes], out: &Loaded) -> Option<Loaded> {
    let threads = crate::cores::cores().min(files.len());
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if threads < 2 || total > out.limits.total_bytes || out.deadline.expired() {
        return None;
    }
    let share = total / threads as u64 + 1;
    let mut runs: Vec<&[FileBytes]> = Vec::with_capacity(threads);
    let (mut start, mut bytes) = (0, 0u64);
    for (i, (_, b)) in files.iter().enumerate() {
        bytes += b.len() as u64;
        if bytes >= share && runs.len() + 1 < threads {
            runs.push(&files[start..=i]);
            (start, bytes) = (i + 1, 0);
        }
    }
    runs.push(&files[start..]);
    let parsed: Vec<Loaded> = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|run| {
                scope.spawn(|| {
                    let mut part = Loaded::new(out.limits.clone()).until(out.deadline.clone());
                    part.check_identity = out.check_identity;
                    part.keep_json = out.keep_json;
                    for (name, b) in *run {
                        parse_into(name, b, &mut part);
                    }
                    part
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().ok())
            .collect::<Option<Vec<Loaded>>>()
    })?;
    let counted: usize = parsed.iter().map(|p| p.counted).sum();
    if counted > out.limits.documents || parsed.iter().any(|p| !p.errors.is_empty() || p.stopped) {
        return None;
    }
    let mut joined = Loaded::new(out.limits.clone()).until(out.deadline.clone());
    joined.check_identity = out.check_identity;
    joined.keep_json = out.keep_json;
    joined.counted = counted;
    joined.bytes = parsed.iter().map(|p| p.bytes).sum();
    joined.documents = Vec::with_capacity(parsed.iter().map(|p| p.documents.len()).sum());
    for p in parsed {
        let before = joined.documents.len();
        joined.documents.extend(p.documents);
        let json = p.json_objects.into_iter().map(|(i, o)| (before + i, o));
        joined.json_objects.extend(json);
    }
    Some(joined)
}
