//! The allocator the binary runs on (mimalloc, chosen in `src/main.rs`), tuned for commands
//! that end soon after their work.

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_option_eager_commit_delay, mi_option_set,
    mi_option_t, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned,
};
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// Alignment every mimalloc block has: block sizes are whole machine words.
const WORD_ALIGN: usize = std::mem::size_of::<usize>();

/// mimalloc, asked the cheaper way where that is allowed. The `mimalloc` crate's allocator
/// asks for every block through `mi_malloc_aligned`, whose checks cost about twice mimalloc's
/// plain fast path; nearly every Rust allocation wants word alignment or less, which every
/// mimalloc block already has, so those take `mi_malloc` and the rest keep the aligned calls.
pub struct Mimalloc;

/// A block for `layout` from `plain` (mimalloc's call without an alignment) when every block
/// has the alignment it asks, else from `aligned`.
#[inline(always)]
unsafe fn by_alignment(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: both are mimalloc's allocation calls, valid for any size and alignment.
    unsafe {
        if layout.align() <= WORD_ALIGN {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every call goes to mimalloc, which returns null on failure; blocks from `mi_malloc`
// are word-aligned, so they are only used for layouts that ask no more; `mi_free` and
// `mi_realloc` take blocks from either kind of call.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl's comment.
        unsafe { by_alignment(layout, mi_malloc, mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl's comment.
        unsafe { by_alignment(layout, mi_zalloc, mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract).
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract).
        unsafe {
            if layout.align() <= WORD_ALIGN {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

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
    fn blocks_have_the_alignment_their_layouts_ask() {
        for align in [1, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [0, 1, 7, 8, 9, 24, 40, 100, 1000, 70_000] {
                let layout = Layout::from_size_align(size.max(1), align).unwrap();
                // SAFETY: the layout's size is not zero; every block is freed below.
                unsafe {
                    let a = Mimalloc.alloc(layout);
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert!(!a.is_null() && !z.is_null());
                    assert_eq!(a as usize % align, 0, "alloc {size} by {align}");
                    assert_eq!(z as usize % align, 0, "alloc_zeroed {size} by {align}");
                    assert!((0..layout.size()).all(|i| *z.add(i) == 0));
                    a.write_bytes(0xA5, layout.size());
                    let grown = Mimalloc.realloc(a, layout, layout.size() * 3 + 5);
                    assert_eq!(grown as usize % align, 0, "realloc {size} by {align}");
                    assert!((0..layout.size()).all(|i| *grown.add(i) == 0xA5));
                    Mimalloc.dealloc(
                        grown,
                        Layout::from_size_align(layout.size() * 3 + 5, align).unwrap(),
                    );
                    Mimalloc.dealloc(z, layout);
                }
            }
        }
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
