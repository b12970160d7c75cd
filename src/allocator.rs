//! The allocator the binary runs on (mimalloc, chosen in `src/main.rs`), tuned for commands
//! that end soon after their work.

use libmimalloc_sys::{mi_option_eager_commit_delay, mi_option_set, mi_option_t};

/// mimalloc v2's `mi_option_purge_delay` (`include/mimalloc.h`: the option after
/// `mi_option_eager_commit_delay`; the bindings do not name it): how long memory freed in bulk
/// stays with the process before it is handed back to the OS, in milliseconds (10 by default,
/// -1 never).
const PURGE_DELAY: mi_option_t = mi_option_eager_commit_delay + 1;

/// Keeps the memory the process frees for its own reuse instead of handing it back to the OS
/// 10 ms later. Memory handed back and touched again is cleared by the kernel once more, page by
/// page, and on these virtual machines a page touched for the first time is expensive (about
/// 0.9 ms per MB): a `check` of 1,002 manifests against a 10,003-object snapshot took 1,370 to
/// 2,400 page faults with the default and about 550 without purging (README, Speed). For every
/// command but `serve`, which runs for days and must give back what a large request took.
pub fn keep_freed_memory() {
    // SAFETY: sets one of mimalloc's global options by its number; mimalloc allows that from
    // any thread at any time, and the number is checked against the header's order in tests.
    unsafe { mi_option_set(PURGE_DELAY, -1) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libmimalloc_sys::mi_option_get;

    fn get(option: mi_option_t) -> std::ffi::c_long {
        // SAFETY: reads one of mimalloc's global options.
        unsafe { mi_option_get(option) }
    }

    #[test]
    fn the_option_set_is_mimallocs_purge_delay() {
        // The header's defaults around it: eager_commit_delay 1, purge_delay 10,
        // use_numa_nodes 0 (unless the environment sets mimalloc's options).
        if std::env::vars_os().all(|(k, _)| !k.to_string_lossy().starts_with("MIMALLOC_")) {
            assert_eq!(get(PURGE_DELAY - 1), 1);
            assert_eq!(get(PURGE_DELAY), 10);
            assert_eq!(get(PURGE_DELAY + 1), 0);
        }
        keep_freed_memory();
        assert_eq!(get(PURGE_DELAY), -1);
    }
}
