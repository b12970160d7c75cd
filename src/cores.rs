//! How many threads work split across cores uses: the machine's available parallelism, read
//! once (each reading opens the process's cgroup files, which costs more than a small file's
//! parse).

use std::sync::OnceLock;

/// The threads to split work across (at least 1).
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
