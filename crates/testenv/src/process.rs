//! Child processes that never outlive the test binary.
//!
//! Every process is started from one long-lived launcher thread with `PR_SET_PDEATHSIG`, so
//! the kernel kills it when the test binary dies, however it dies (a panic, a signal, or the
//! harness calling `exit` with a shared control plane still in a `static`, whose `Drop` never
//! runs). An `atexit` hook also removes the data directories of control planes still alive.
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, Once, OnceLock};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

fn launcher() -> &'static Mutex<mpsc::Sender<Request>> {
    static L: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    L.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("bosun-testenv-launcher".into())
            .spawn(move || {
                while let Ok((mut cmd, reply)) = rx.recv() {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .ok();
        Mutex::new(tx)
    })
}

/// Spawns `cmd` so that it dies with this process.
pub fn spawn(mut cmd: Command) -> io::Result<Child> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let (tx, rx) = mpsc::channel();
    launcher()
        .lock()
        .map_err(|_| io::Error::other("launcher lock poisoned"))?
        .send((cmd, tx))
        .map_err(|_| io::Error::other("launcher thread gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("launcher thread gone"))?
}

static LIVE_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn cleanup_at_exit() {
    if let Ok(dirs) = LIVE_DIRS.lock() {
        for d in dirs.iter() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Registers a data directory to delete at process exit if nobody dropped it before.
pub fn register_dir(dir: PathBuf) {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        // SAFETY: registering a plain extern "C" function.
        unsafe {
            libc::atexit(cleanup_at_exit);
        }
    });
    if let Ok(mut d) = LIVE_DIRS.lock() {
        d.push(dir);
    }
}

pub fn unregister_dir(dir: &PathBuf) {
    if let Ok(mut d) = LIVE_DIRS.lock() {
        d.retain(|x| x != dir);
    }
}

/// True while a process with this pid exists.
pub fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// `n` distinct free loopback TCP ports (bound together, then released: the short race with
/// other processes is accepted in tests).
pub fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<io::Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}
