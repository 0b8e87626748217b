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

/// Makes glibc's allocator keep one arena for the whole process, unless the user chose
/// (`MALLOC_ARENA_MAX`, or `arena_max` in `GLIBC_TUNABLES`); a no-op elsewhere. Returns
/// whether the setting was applied. Call it before the first thread starts.
///
/// glibc gives each thread that meets a locked arena a new one (up to eight per core), and
/// memory freed in one arena is not reused by another: after an operator's first sync and
/// convergence, every Tokio worker's arena kept its own share of the peak. With one arena
/// the Helm flavour's steady RSS at 1000 custom resources was 37.3 MB instead of 43.8
/// (anonymous 18.5 MB instead of 23.3), converging as fast (BENCHMARKS.md): an operator's
/// threads spend their time waiting on the API server, not contending for the allocator.
pub fn one_arena() -> bool {
    let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if chosen {
        return false;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        const M_ARENA_MAX: i32 = -8;
        // SAFETY: mallopt only changes the allocator's own parameters.
        unsafe { mallopt(M_ARENA_MAX, 1) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod arena_tests {
    #[test]
    fn glibc_takes_the_one_arena_setting_unless_the_user_chose() {
        let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
        assert_eq!(super::one_arena(), !chosen);
    }
}
