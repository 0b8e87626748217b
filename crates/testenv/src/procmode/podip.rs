//! Unique loopback pod IPs. Linux routes all of 127.0.0.0/8 to `lo`, so every address in it
//! can be bound without configuring anything. Each test process takes a /16 of its own,
//! `127.<n>.0.0`, held by an advisory lock on `/tmp/bosun-podnet/<n>.lock` (the kernel drops
//! it when the process dies, however it dies), so agents of test binaries running at the
//! same time never hand out the same address; within the process a counter does.
use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

const LOCK_DIR: &str = "/tmp/bosun-podnet";

/// Hosts per block: 254 × 254 (third octet 0..=253, fourth 1..=254).
const HOSTS: u32 = 254 * 254;

fn block() -> io::Result<u8> {
    static BLOCK: OnceLock<Result<(u8, File), String>> = OnceLock::new();
    let b = BLOCK.get_or_init(|| {
        std::fs::create_dir_all(LOCK_DIR).map_err(|e| format!("{LOCK_DIR}: {e}"))?;
        // 127.0.0.0/16 holds the control plane's own 127.0.0.1.
        for n in 1..=254u8 {
            let f = File::create(format!("{LOCK_DIR}/{n}.lock"))
                .map_err(|e| format!("{LOCK_DIR}/{n}.lock: {e}"))?;
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok((n, f));
            }
        }
        Err("all 254 loopback pod networks (127.1-254.0.0/16) are held by other processes".into())
    });
    b.as_ref()
        .map(|(n, _)| *n)
        .map_err(|e| io::Error::other(e.clone()))
}

/// This process's own loopback network: `127.<n>.0.0/16`, held for the life of the process.
/// Tests that place processes on fixed addresses build them inside it (third octet ≥ 1 stays
/// clear of [`next`] for its first 254 addresses), so they never meet another test binary's.
pub fn network() -> io::Result<u8> {
    block()
}

/// A pod IP never handed out before by this process.
pub fn next() -> io::Result<Ipv4Addr> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = block()?;
    let i = NEXT.fetch_add(1, Ordering::Relaxed);
    if i >= HOSTS {
        return Err(io::Error::other("this process ran out of loopback pod IPs"));
    }
    Ok(Ipv4Addr::new(127, n, (i / 254) as u8, (i % 254 + 1) as u8))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn addresses_are_distinct_loopback_outside_127_0() {
        let a = super::next().unwrap();
        let b = super::next().unwrap();
        assert_ne!(a, b);
        for ip in [a, b] {
            assert!(ip.is_loopback());
            assert_ne!(ip.octets()[1], 0);
            std::net::TcpListener::bind((ip, 0)).unwrap();
        }
    }
}
