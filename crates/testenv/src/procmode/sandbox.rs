//! A container as a local process: a root directory built from the host's `/usr`, `/etc`,
//! `/opt`, `/dev`, `/proc` and `/sys` (bind mounts), fresh `/tmp`, `/run` and `/var`, the
//! image's files and the pod's volumes at their mount paths. The mounts are made by the child
//! itself, between fork and exec, in a mount namespace of its own (private propagation): the
//! host never sees them, so removing a container's directory only ever removes empty mount
//! points. It has a UTS namespace too, named as the pod. Then it changes root, starts a
//! session (its own process group, for the group kill), drops to the unprivileged user and
//! execs — the program is looked up on the container's `PATH`, inside its root.
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{chown, symlink, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;

use tokio::io::unix::AsyncFd;

use super::images::Image;

/// Host directories a container sees (recursive bind mounts); symbolic links among them
/// (`/bin` → `usr/bin` on merged-/usr systems) are copied as links.
const HOST_DIRS: &[&str] = &[
    "usr", "etc", "opt", "dev", "proc", "sys", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
}

/// The uid and gid of `name`, from `/etc/passwd`.
pub fn lookup_user(name: &str) -> io::Result<Option<User>> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    Ok(passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| {
            Some(User {
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
            })
        })?
    }))
}

/// A volume's host directory (or file) at a path in the container.
pub struct Mount {
    pub host: PathBuf,
    pub container: String,
}

/// A prepared container root: spawn its processes with [`Sandbox::command`].
pub struct Sandbox {
    rootfs: CString,
    hostname: Vec<u8>,
    binds: Arc<Vec<(CString, CString)>>,
    workdir: CString,
    user: User,
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)
}

/// `rootfs` + an absolute container path, refusing `..`.
fn inside(rootfs: &Path, container: &str) -> io::Result<PathBuf> {
    let rel = container.trim_start_matches('/');
    if Path::new(rel)
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(io::Error::other(format!(
            "path {container:?} must be absolute and plain"
        )));
    }
    Ok(rootfs.join(rel))
}

fn under_host_dir(container: &str) -> Option<&'static str> {
    let first = container.trim_start_matches('/').split('/').next()?;
    HOST_DIRS.iter().copied().find(|d| *d == first)
}

fn dir_mode(p: &Path, mode: u32) -> io::Result<()> {
    std::fs::create_dir_all(p)?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
}

impl Sandbox {
    /// Builds the root directory at `rootfs` (which must not exist yet).
    pub fn build(
        rootfs: &Path,
        image: &Image,
        mounts: &[Mount],
        workdir: Option<&str>,
        hostname: &str,
        user: User,
    ) -> io::Result<Sandbox> {
        std::fs::create_dir_all(rootfs)?;
        let mut binds = Vec::new();
        for name in HOST_DIRS {
            let host = Path::new("/").join(name);
            let Ok(meta) = std::fs::symlink_metadata(&host) else {
                continue;
            };
            let at = rootfs.join(name);
            if meta.file_type().is_symlink() {
                symlink(std::fs::read_link(&host)?, &at)?;
            } else if meta.is_dir() {
                std::fs::create_dir_all(&at)?;
                binds.push((cstr(&host)?, cstr(&at)?));
            }
        }
        dir_mode(&rootfs.join("tmp"), 0o1777)?;
        dir_mode(&rootfs.join("run/lock"), 0o1777)?;
        dir_mode(&rootfs.join("var/tmp"), 0o1777)?;
        symlink("../run", rootfs.join("var/run"))?;
        symlink("../run/lock", rootfs.join("var/lock"))?;
        let own = |p: &Path| chown(p, Some(user.uid), Some(user.gid));
        for d in &image.dirs {
            let p = inside(rootfs, d)?;
            std::fs::create_dir_all(&p)?;
            own(&p)?;
        }
        for (at, host) in &image.files {
            let p = inside(rootfs, at)?;
            File::create(&p)?;
            binds.push((cstr(host)?, cstr(&p)?));
        }
        // Parents before children, so a volume mounted inside another stays visible.
        let mut sorted: Vec<&Mount> = mounts.iter().collect();
        sorted.sort_by_key(|m| m.container.matches('/').count());
        for m in sorted {
            if let Some(d) = under_host_dir(&m.container) {
                return Err(io::Error::other(format!(
                    "mount path {:?} is inside the host's /{d}, which process mode shares \
                     with every container",
                    m.container
                )));
            }
            let p = inside(rootfs, &m.container)?;
            if m.host.is_dir() {
                std::fs::create_dir_all(&p)?;
            } else {
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                File::create(&p)?;
            }
            binds.push((cstr(&m.host)?, cstr(&p)?));
        }
        let workdir = workdir.unwrap_or("/");
        if under_host_dir(workdir).is_none() {
            let p = inside(rootfs, workdir)?;
            if !p.exists() {
                std::fs::create_dir_all(&p)?;
                own(&p)?;
            }
        }
        Ok(Sandbox {
            rootfs: cstr(rootfs)?,
            hostname: hostname.as_bytes().iter().copied().take(63).collect(),
            binds: Arc::new(binds),
            workdir: CString::new(workdir).map_err(io::Error::other)?,
            user,
        })
    }

    /// A command running `argv` in this container with exactly `env`, its output appended
    /// to `log` (or discarded).
    pub fn command(
        &self,
        argv: &[String],
        env: &[(String, String)],
        log: Option<&File>,
    ) -> io::Result<Command> {
        let Some(program) = argv.first() else {
            return Err(io::Error::other(
                "no command: the container sets none and its image has no entrypoint",
            ));
        };
        let mut cmd = Command::new(program);
        cmd.args(&argv[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (OsStr::new(k), OsStr::new(v))))
            .stdin(Stdio::null());
        match log {
            Some(f) => {
                cmd.stdout(Stdio::from(f.try_clone()?))
                    .stderr(Stdio::from(f.try_clone()?));
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        let binds = self.binds.clone();
        let rootfs = self.rootfs.clone();
        let hostname = self.hostname.clone();
        let workdir = self.workdir.clone();
        let User { uid, gid } = self.user;
        // SAFETY: between fork and exec only system calls run, on memory prepared before the
        // fork (no allocation, no lock).
        unsafe {
            cmd.pre_exec(move || {
                let ok = |r: libc::c_int| {
                    if r == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                };
                let null = std::ptr::null::<libc::c_char>();
                ok(libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS))?;
                // The pod's name, as a container's hostname is.
                ok(libc::sethostname(hostname.as_ptr().cast(), hostname.len()))?;
                // Nothing mounted below leaks to the host's namespace.
                ok(libc::mount(
                    c"none".as_ptr(),
                    c"/".as_ptr(),
                    null,
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ))?;
                for (src, dst) in binds.iter() {
                    ok(libc::mount(
                        src.as_ptr(),
                        dst.as_ptr(),
                        null,
                        libc::MS_BIND | libc::MS_REC,
                        std::ptr::null(),
                    ))?;
                }
                ok(libc::chroot(rootfs.as_ptr()))?;
                ok(libc::chdir(workdir.as_ptr()))?;
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                ok(libc::setgroups(1, &gid))?;
                ok(libc::setgid(gid))?;
                ok(libc::setuid(uid))
            });
        }
        Ok(cmd)
    }
}

/// A started process: its exit is awaited through a pidfd, signals go through it too (no
/// race with a reused pid), and its process group is `pgid`.
pub struct Proc {
    child: Child,
    pidfd: AsyncFd<OwnedFd>,
    pub pgid: i32,
}

impl Proc {
    pub fn spawn(cmd: Command) -> io::Result<Proc> {
        let child = crate::process::spawn(cmd)?;
        let pid = child.id() as libc::pid_t;
        // SAFETY: pidfd_open on our own unreaped child; the descriptor is owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            kill_group(pid);
            return Err(e);
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // SAFETY: the OwnedFd keeps the descriptor open, unchanged, as long as the AsyncFd.
        let pidfd = unsafe { AsyncFd::register(fd) }?;
        Ok(Proc {
            child,
            pidfd,
            pgid: pid,
        })
    }

    /// The pipes the command was given (`Stdio::piped()`), once.
    pub fn take_stdio(
        &mut self,
    ) -> (
        Option<std::process::ChildStdin>,
        Option<std::process::ChildStdout>,
        Option<std::process::ChildStderr>,
    ) {
        (
            self.child.stdin.take(),
            self.child.stdout.take(),
            self.child.stderr.take(),
        )
    }

    /// Waits for the process to exit (and reaps it).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            let mut guard = self.pidfd.readable().await?;
            guard.clear_ready();
        }
    }

    /// Sends `sig` to the process (not its group).
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: pidfd_send_signal with no siginfo.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.get_ref().as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

/// SIGKILL to every process of the group.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: plain kill(2) of a process group this agent started.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// The exit code Kubernetes reports: the code, or 128 + the signal.
pub fn exit_code(s: &ExitStatus) -> (i32, Option<i32>) {
    match (s.code(), s.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(sig)) => (128 + sig, Some(sig)),
        _ => (-1, None),
    }
}

/// Removes a directory tree, refusing when anything is mounted below it in this namespace
/// (a container's mounts live in its own namespace; this guards the host's `/usr` should
/// that ever fail to hold).
pub fn remove_tree(dir: &Path) -> io::Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let prefix = dir.as_os_str().as_bytes();
    for line in info.lines() {
        if let Some(point) = line.split(' ').nth(4) {
            if point.as_bytes().starts_with(prefix) {
                return Err(io::Error::other(format!(
                    "not removing {}: {point} is mounted inside it",
                    dir.display()
                )));
            }
        }
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}
