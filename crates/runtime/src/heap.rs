//! A counting global allocator, for measuring where an operator's memory goes.
//!
//! A binary opts in with `#[global_allocator] static A: bosun_runtime::heap::Counting =
//! bosun_runtime::heap::Counting;` (`bosun` does under its `heap-stats` feature, `bench/heap`'s
//! profiler always). It forwards to the system allocator and keeps
//! three atomic counters: bytes live now, the most live since the last [`reset_peak`], and
//! allocations made. Live bytes are what the program asked for; the process's RSS adds the
//! allocator's own overhead and fragmentation, the stacks and the binary's touched pages.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are only arithmetic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            ALLOCS.fetch_add(1, Relaxed);
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            ALLOCS.fetch_add(1, Relaxed);
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
        }
        p
    }
}

/// Bytes allocated and not yet freed (0 unless [`Counting`] is the global allocator).
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

/// The most bytes live at once since the start or the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// Allocations made since the start.
pub fn allocations() -> usize {
    ALLOCS.load(Relaxed)
}

/// Starts a new peak from what is live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    // The unit tests' allocator is the system one: counting is exercised by calling the
    // allocator directly.
    #[test]
    fn live_and_peak_follow_allocations_reallocations_and_frees() {
        let a = Counting;
        let before = live();
        reset_peak();
        let layout = Layout::from_size_align(1000, 8).expect("layout");
        // SAFETY: a fresh allocation, resized and freed with the layouts it had.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            assert_eq!(live() - before, 1000);
            let q = a.realloc(p, layout, 4000);
            assert!(!q.is_null());
            assert_eq!(live() - before, 4000);
            let q = a.realloc(q, Layout::from_size_align(4000, 8).expect("layout"), 10);
            assert_eq!(live() - before, 10);
            a.dealloc(q, Layout::from_size_align(10, 8).expect("layout"));
        }
        assert_eq!(live(), before);
        assert!(peak() >= before + 4000);
    }
}

/// Hands the pages of freed memory back to the system (glibc's `malloc_trim`; a no-op
/// elsewhere). glibc keeps what a burst freed inside its arenas, resident: after an
/// operator's first sync and convergence (its peak), steady RSS kept that peak's free pages.
/// [`crate::manager::Manager::run`] calls this every [`TRIM_EVERY`]; the cost is a walk of
/// the arenas' free lists (well under a millisecond for an operator's heap), and a page
/// given back is faulted in again only if the heap grows into it.
pub fn release_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only inspects and trims the allocator's own free lists.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// How often a running manager calls [`release_free`].
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod trim_tests {
    fn rss_anon_kb() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("RssAnon:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }

    /// 64 MB in 4 KB blocks, then every block freed but one in 16, so that no free memory
    /// sits at the top of the heap where plain `free` would return it: only the trim hands
    /// the free pages between the kept blocks back.
    #[test]
    fn freed_pages_inside_the_heap_are_handed_back() {
        let mut blocks: Vec<Vec<u8>> = (0..16_384).map(|i| vec![(i % 251) as u8; 4000]).collect();
        let mut kept = Vec::new();
        for (i, b) in blocks.drain(..).enumerate() {
            if i % 16 == 0 {
                kept.push(b);
            }
        }
        let before = rss_anon_kb();
        super::release_free();
        let after = rss_anon_kb();
        assert!(
            before > after + 32 * 1024,
            "RssAnon {before} kB before the trim, {after} kB after: less than 32 MB handed back"
        );
        assert_eq!(kept.len(), 1024);
        assert!(kept
            .iter()
            .enumerate()
            .all(|(i, b)| b[0] == ((i * 16) % 251) as u8));
    }
}
