//! Work split across cores: how many threads to use (the machine's available parallelism,
//! read once: each reading opens the process's cgroup files, which costs more than a small
//! file's parse), and a map over contiguous chunks that threads take as they come free: the
//! threads of one pool, started once for the process (`rayon-core`), which every stage shares.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The threads to split work across (at least 1).
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Chunks per thread [`chunk_len`] aims at: enough that a thread slowed by other work (a core
/// shared with another stage, the kernel) leaves its share to the others, few enough that
/// taking one costs nothing next to the work.
const CHUNKS_PER_THREAD: usize = 16;

/// Items per chunk for `n` items on [`cores`] threads.
pub fn chunk_len(n: usize) -> usize {
    n.div_ceil(cores() * CHUNKS_PER_THREAD).max(1)
}

/// `work` on each contiguous chunk of `len` items of `items`, on the calling thread and
/// `threads - 1` others, each taking the next chunk as it comes free; the results in the
/// chunks' order, a chunk whose work panicked as its panic (the others still run). Threads are
/// started only for work there is: never more than the chunks.
pub fn map_chunks<T: Sync, R: Send>(
    items: &[T],
    len: usize,
    threads: usize,
    work: impl Fn(&[T]) -> R + Sync,
) -> Vec<std::thread::Result<R>> {
    on_chunks(items.chunks(len.max(1)).collect(), threads, work)
}

/// [`map_chunks`], each chunk's work free to change its items.
pub fn map_chunks_mut<T: Send, R: Send>(
    items: &mut [T],
    len: usize,
    threads: usize,
    work: impl Fn(&mut [T]) -> R + Sync,
) -> Vec<std::thread::Result<R>> {
    on_chunks(items.chunks_mut(len.max(1)).collect(), threads, work)
}

/// `work` on one of the pool's threads (those [`map_chunks`] runs on), awaited without holding
/// an async runtime's thread: `None` if it panicked.
pub async fn on_pool<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon_core::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(work)).ok());
    });
    rx.await.ok().flatten()
}

/// `work` on each of `chunks`, each taken once by the next thread to come free.
fn on_chunks<C: Send, R: Send>(
    chunks: Vec<C>,
    threads: usize,
    work: impl Fn(C) -> R + Sync,
) -> Vec<std::thread::Result<R>> {
    let count = chunks.len();
    let helpers = threads.min(count).saturating_sub(1);
    // Neither lock is held where anything can panic: a poisoned one is still whole.
    let queue = Mutex::new(chunks.into_iter().enumerate());
    let done = Mutex::new(Vec::with_capacity(count));
    let run = || {
        let mut mine = Vec::new();
        loop {
            let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
            let Some((i, chunk)) = next else { break };
            mine.push((i, catch_unwind(AssertUnwindSafe(|| work(chunk)))));
        }
        done.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(mine);
    };
    // The helpers are the process's pool's threads, started once: a thread started for each
    // stage costs its start and a fresh heap, whose memory the kernel clears page by page.
    rayon_core::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| run());
        }
        run();
    });
    let mut done: Vec<(usize, std::thread::Result<R>)> =
        done.into_inner().unwrap_or_else(PoisonError::into_inner);
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_come_back_in_order_whatever_thread_ran_them() {
        let items: Vec<u32> = (0..1000).collect();
        for (len, threads) in [(1, 4), (7, 2), (1000, 3), (3, 1), (2000, 2)] {
            let sums: Vec<u32> = map_chunks(&items, len, threads, |c| c.iter().sum())
                .into_iter()
                .map(|r| r.expect("no panic"))
                .collect();
            let expected: Vec<u32> = items.chunks(len).map(|c| c.iter().sum()).collect();
            assert_eq!(sums, expected, "len {len}, threads {threads}");
        }
        assert!(map_chunks(&[] as &[u32], 4, 2, |c| c.len()).is_empty());
    }

    /// Work sent to the pool comes back to the task awaiting it; work that panics comes back
    /// as nothing, and the pool still takes work after it.
    #[tokio::test(flavor = "current_thread")]
    async fn work_on_the_pool_comes_back_and_a_panic_comes_back_as_none() {
        let items: Vec<u64> = (1..=100).collect();
        let sum = on_pool(move || items.iter().sum::<u64>()).await;
        assert_eq!(sum, Some(5050));
        let panicked = on_pool(|| -> u64 { panic!("work that fails") }).await;
        assert_eq!(panicked, None);
        let nested = on_pool(|| {
            let items: Vec<u32> = (0..64).collect();
            map_chunks(&items, 4, 2, |c| c.len())
                .into_iter()
                .map(|r| r.expect("no panic"))
                .sum::<usize>()
        })
        .await;
        assert_eq!(nested, Some(64));
    }

    #[test]
    fn chunks_changed_in_place_are_each_changed_once() {
        let mut items: Vec<u32> = (0..500).collect();
        let lens = map_chunks_mut(&mut items, 9, 3, |c| {
            c.iter_mut().for_each(|x| *x *= 2);
            c.len()
        });
        assert_eq!(
            lens.into_iter()
                .map(|r| r.expect("no panic"))
                .sum::<usize>(),
            500
        );
        assert_eq!(items, (0..500).map(|x| x * 2).collect::<Vec<u32>>());
    }

    #[test]
    fn a_chunk_that_panics_is_its_own_result_and_the_rest_still_run() {
        let items: Vec<u32> = (0..64).collect();
        let out = map_chunks(&items, 8, 2, |c| {
            assert!(!c.contains(&20), "chunk with 20");
            c[0]
        });
        assert_eq!(out.len(), 8);
        for (i, r) in out.iter().enumerate() {
            match r {
                Ok(first) => assert_eq!(*first, 8 * i as u32),
                Err(_) => assert_eq!(i, 2),
            }
        }
    }

    #[test]
    fn chunk_lengths_leave_several_chunks_per_thread() {
        assert_eq!(chunk_len(0), 1);
        assert_eq!(chunk_len(1), 1);
        let n: usize = 10_000;
        let chunks = n.div_ceil(chunk_len(n));
        assert!(chunks >= cores() * CHUNKS_PER_THREAD / 2 && chunks <= cores() * CHUNKS_PER_THREAD);
    }
}
