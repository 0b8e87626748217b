//! Memory `bosun run` hands back once it is at rest.
//!
//! * **The heap.** glibc's malloc keeps memory freed after a burst (parsing the initial LISTs,
//!   a wave of reconciles) in its arenas, so RSS would stay at the peak: `malloc_trim` every
//!   tick keeps the steady RSS near the live heap.
//! * **The binary's own pages.** Linux maps 64 KB of a file around every page fault
//!   (`fault_around_bytes`), so starting up and converging leaves about half of bosun's code
//!   resident (14.5 of 25.5 MB of `.text` in the Ansible flavour, at rest) although an idle
//!   operator runs a small part of it. Once the process has worked and gone quiet for a tick (5 s),
//!   the read-only pages of its executable are unmapped (`MADV_DONTNEED`); what runs next is
//!   mapped back from the page cache by a minor fault. Measured by `bench/run` (BENCHMARKS.md).
//!   Only mappings of the executable that are read-only, private and hold no private copy of a
//!   page (`Anonymous: 0 kB` in smaps) qualify: their contents are exactly the file's, so a
//!   fault brings back the same bytes. That leaves out `.data`, `.bss` and the RELRO segment
//!   (written by the loader, then made read-only). `BOSUN_KEEP_CODE_PAGES=1` turns it off.
use std::time::Duration;

/// How often the process looks at itself: a quiet operator is lean 5-10 s after its work.
const TICK: Duration = Duration::from_secs(5);
/// CPU time over one tick below which the process counts as quiet (1 % of a core): Lease
/// renewals every 500 ms (leader election, a shard's membership) are quiet.
const QUIET: Duration = Duration::from_millis(50);
/// CPU time since the last release above which there is something worth releasing again
/// (idle work alone adds up to it every few minutes: a release then costs a few minor faults).
const WORKED: Duration = Duration::from_millis(200);

pub(crate) fn hand_back_periodically() {
    let release_code = std::env::var_os("BOSUN_KEEP_CODE_PAGES").is_none_or(|v| v != "1");
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        let mut pace = Pace::default();
        loop {
            tick.tick().await;
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only releases free memory; no pointer is touched.
            unsafe {
                libc::malloc_trim(0);
            }
            #[cfg(feature = "heap-stats")]
            tracing::info!(
                live_bytes = bosun_runtime::heap::live(),
                peak_bytes = bosun_runtime::heap::peak(),
                allocations = bosun_runtime::heap::allocations(),
                "heap"
            );
            let Some(cpu) = cpu_time() else { continue };
            if release_code && pace.release_now(cpu) {
                match release_code_pages() {
                    Ok(bytes) => tracing::debug!(bytes, "released the binary's resident pages"),
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot release the binary's pages");
                        return;
                    }
                }
            }
        }
    });
}

/// When to release: after work (or at the first quiet tick after start), once a whole tick
/// passed quietly — never while the process works, which would only fault the pages back.
#[derive(Debug, Default)]
struct Pace {
    /// CPU time at the previous tick.
    last: Option<Duration>,
    /// CPU time when the pages were last released.
    released_at: Option<Duration>,
}

impl Pace {
    fn release_now(&mut self, cpu: Duration) -> bool {
        let quiet = self
            .last
            .replace(cpu)
            .is_some_and(|last| cpu.saturating_sub(last) < QUIET);
        let worked = self
            .released_at
            .is_none_or(|r| cpu.saturating_sub(r) >= WORKED);
        let now = quiet && worked;
        if now {
            self.released_at = Some(cpu);
        }
        now
    }
}

/// User and system CPU time of the whole process.
fn cpu_time() -> Option<Duration> {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let t = |v: libc::timeval| {
        Duration::from_secs(v.tv_sec.max(0) as u64) + Duration::from_micros(v.tv_usec.max(0) as u64)
    };
    Some(t(u.ru_utime) + t(u.ru_stime))
}

/// A mapping of the process, as smaps shows it.
#[derive(Debug, PartialEq)]
struct Mapping {
    start: usize,
    end: usize,
    perms: String,
    path: String,
    rss_kb: u64,
    anonymous_kb: Option<u64>,
}

fn parse_smaps(smaps: &str) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::new();
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some((a, b)) = first.split_once('-') {
            if let (Ok(start), Ok(end)) =
                (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                let perms = fields.next().unwrap_or_default().to_string();
                // offset, device, inode; the path is the rest of the line, spaces included.
                let path = line
                    .splitn(6, char::is_whitespace)
                    .nth(5)
                    .map(|p| p.trim_start().to_string())
                    .unwrap_or_default();
                out.push(Mapping {
                    start,
                    end,
                    perms,
                    path,
                    rss_kb: 0,
                    anonymous_kb: None,
                });
                continue;
            }
        }
        let mut kb = || fields.next().and_then(|v| v.parse::<u64>().ok());
        match (first, out.last_mut()) {
            ("Rss:", Some(m)) => m.rss_kb = kb().unwrap_or_default(),
            ("Anonymous:", Some(m)) => m.anonymous_kb = kb(),
            _ => {}
        }
    }
    out
}

/// The mappings of `exe` whose pages are exactly the file's: read-only, private, no private
/// copy of any page. A mapping smaps does not say `Anonymous` of is left alone.
fn releasable<'a>(maps: &'a [Mapping], exe: &'a str) -> impl Iterator<Item = &'a Mapping> {
    maps.iter().filter(move |m| {
        let p = m.perms.as_bytes();
        m.path == exe
            && p.len() == 4
            && p[0] == b'r'
            && p[1] == b'-'
            && p[3] == b'p'
            && m.anonymous_kb == Some(0)
            && m.end > m.start
    })
}

fn exe_path() -> std::io::Result<String> {
    Ok(std::fs::read_link("/proc/self/exe")?
        .to_string_lossy()
        .into_owned())
}

/// Unmaps the resident pages of the executable's read-only mappings; returns the bytes that
/// were resident.
fn release_code_pages() -> std::io::Result<u64> {
    let exe = exe_path()?;
    let maps = parse_smaps(&std::fs::read_to_string("/proc/self/smaps")?);
    let mut bytes = 0;
    for m in releasable(&maps, &exe) {
        // SAFETY: the range is one whole mapping of the executable that is read-only and
        // private and holds no page of its own (checked just above); MADV_DONTNEED drops its
        // page table entries and a later access reads the same bytes from the file again. No
        // Rust reference can observe the difference.
        let r = unsafe {
            libc::madvise(
                m.start as *mut libc::c_void,
                m.end - m.start,
                libc::MADV_DONTNEED,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        bytes += m.rss_kb * 1024;
    }
    Ok(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
00200000-00bea000 r--p 00000000 fd:01 123 /opt/bosun/bin/bosun
Rss:                2300 kB
Anonymous:             0 kB
00bea000-02561000 r-xp 009e9000 fd:01 123 /opt/bosun/bin/bosun
Rss:               12240 kB
Anonymous:             0 kB
02561000-02567000 r--p 0235f000 fd:01 123 /opt/bosun/bin/bosun
Rss:                  24 kB
Anonymous:            24 kB
02567000-0256d000 rw-p 02364000 fd:01 123 /opt/bosun/bin/bosun
Rss:                  20 kB
Anonymous:            20 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 77 /usr/lib/libc.so.6
Rss:                 800 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 fd:01 78 /opt/bosun/bin/bosun (deleted)
Rss:                 100 kB
Anonymous:             0 kB
7f0000400000-7f0000500000 r--s 00000000 fd:01 123 /opt/bosun/bin/bosun
Rss:                 100 kB
Anonymous:             0 kB
7f0000600000-7f0000700000 r-xp 00000000 fd:01 123 /opt/bosun/bin/bosun
Rss:                 100 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  40 kB
Anonymous:            40 kB
";

    #[test]
    fn only_the_executables_untouched_read_only_private_mappings_are_released() {
        let maps = parse_smaps(SMAPS);
        assert_eq!(maps.len(), 9);
        assert_eq!(maps[8].path, "[stack]");
        let got: Vec<(usize, usize)> = releasable(&maps, "/opt/bosun/bin/bosun")
            .map(|m| (m.start, m.end))
            .collect();
        // Not the RELRO segment (read-only now, written by the loader), not .data, not another
        // file, not a shared mapping, not one whose smaps entry says nothing of anonymous pages.
        assert_eq!(got, vec![(0x200000, 0xbea000), (0xbea000, 0x2561000)]);
        // A replaced binary: smaps and /proc/self/exe both say "(deleted)".
        let got: Vec<usize> = releasable(&maps, "/opt/bosun/bin/bosun (deleted)")
            .map(|m| m.start)
            .collect();
        assert_eq!(got, vec![0x7f0000200000]);
    }

    #[test]
    fn released_after_work_once_a_tick_was_quiet() {
        let ms = Duration::from_millis;
        let little = QUIET / 2;
        let mut p = Pace::default();
        assert!(
            !p.release_now(ms(900)),
            "the first tick has no interval to judge"
        );
        assert!(!p.release_now(ms(1500)), "busy: 600 ms in a tick");
        assert!(
            p.release_now(ms(1500) + little),
            "quiet after start-up's work"
        );
        let t = ms(1500) + little * 2;
        assert!(!p.release_now(t), "quiet, but nothing ran since");
        let t = t + little;
        assert!(
            !p.release_now(t),
            "idle work faulting a few pages back is not work"
        );
        assert!(!p.release_now(t + WORKED), "busy again");
        assert!(p.release_now(t + WORKED + little), "quiet after work");
    }

    /// This test binary releases its own code while the other tests run in its threads, and
    /// goes on running: the pages come back from the file.
    #[test]
    fn the_process_runs_on_after_its_code_pages_are_released() {
        let exe = exe_path().unwrap();
        let resident = || -> u64 {
            let maps = parse_smaps(&std::fs::read_to_string("/proc/self/smaps").unwrap());
            releasable(&maps, &exe).map(|m| m.rss_kb).sum()
        };
        let maps = parse_smaps(&std::fs::read_to_string("/proc/self/smaps").unwrap());
        let ranges: Vec<(usize, usize)> =
            releasable(&maps, &exe).map(|m| (m.start, m.end)).collect();
        assert!(!ranges.is_empty(), "no read-only mapping of {exe}");
        let total_kb: u64 = ranges.iter().map(|(a, b)| ((b - a) / 1024) as u64).sum();
        // Everything resident first, so that what is released is known.
        for &(a, b) in &ranges {
            for p in (a..b).step_by(4096) {
                // SAFETY: a readable mapping of this process, read one byte per page.
                unsafe { std::ptr::read_volatile(p as *const u8) };
            }
        }
        let before = resident();
        assert!(
            before * 10 >= total_kb * 9,
            "{before} kB of {total_kb} kB resident"
        );
        let released = release_code_pages().unwrap();
        assert!(
            released >= before * 1024 / 2,
            "released {released} bytes of {before} kB"
        );
        let after = resident();
        assert!(
            after * 2 < before,
            "{after} kB resident after, {before} kB before"
        );
        // Code released a moment ago runs, and data it reads (string constants of .rodata)
        // are the file's bytes.
        let again = parse_smaps(SMAPS);
        assert_eq!(again[0].path, "/opt/bosun/bin/bosun");
        assert_eq!(format!("{:?}", Some(3)), "Some(3)");
    }
}
