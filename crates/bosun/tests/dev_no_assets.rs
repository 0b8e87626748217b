//! `bosun dev` on a machine that cannot build the local control plane (issue 14): no Go, or
//! no reachable Go module proxy, and nothing cached. It must stop before building anything,
//! exit non-zero, and say what is missing and the two ways out (BOSUN_ASSETS with official
//! binaries, or --use-current-cluster). HOME is an empty directory, so the real cache is never
//! read or written; the time limit only guards against a hang, it asserts nothing.
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const HANG_GUARD: Duration = Duration::from_secs(300);

/// `bosun dev --once` with HOME at `home` and no asset override.
fn dev(program: &str, leading_args: &[&str], home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(leading_args)
        .args(["dev", "--once"])
        .env("HOME", home)
        .env_remove("BOSUN_ASSETS")
        .env_remove("BOSUN_BUILD_DIR");
    cmd
}

/// Runs `cmd` to the end; kills its whole process group if it runs past [`HANG_GUARD`].
fn run_guarded(mut cmd: Command) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().expect("spawn bosun dev");
    let pgid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(HANG_GUARD) {
        Ok(out) => out.expect("wait for bosun dev"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .status();
            panic!("bosun dev was still running after {HANG_GUARD:?} instead of failing");
        }
    }
}

/// A directory standing in for PATH: every command of the real PATH but `go`, as on a
/// machine without a Go toolchain.
fn path_without_go(into: &Path) -> String {
    let real = std::env::var_os("PATH").expect("PATH");
    for dir in std::env::split_paths(&real) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let link = into.join(&name);
            if name == "go" || link.symlink_metadata().is_ok() {
                continue;
            }
            let _ = std::os::unix::fs::symlink(entry.path(), link);
        }
    }
    into.display().to_string()
}

fn assert_names_missing_and_ways_out(out: &Output, cause: &str, home: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0:\n{stderr}");
    for needle in [
        cause,
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "BOSUN_ASSETS=",
        "--use-current-cluster",
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in:\n{stderr}");
    }
    // The script's lines come with the elapsed time, as during a real build.
    assert!(
        stderr.contains("] [setup-assets] cannot build the test control plane here"),
        "{stderr}"
    );
    // Nothing was built or installed.
    let assets = home
        .join(".cache/bosun/assets")
        .join(bosun_testenv::current_version());
    let built: Vec<_> = std::fs::read_dir(&assets)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(built.is_empty(), "{} holds {built:?}", assets.display());
}

#[test]
fn without_go_it_fails_at_once_naming_the_ways_out() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (home, bin) = (tmp.path().join("home"), tmp.path().join("bin"));
    std::fs::create_dir_all(&home).expect("home");
    std::fs::create_dir_all(&bin).expect("bin");
    let mut cmd = dev(env!("CARGO_BIN_EXE_bosun"), &[], &home);
    cmd.env("PATH", path_without_go(&bin));
    let out = run_guarded(cmd);
    assert_names_missing_and_ways_out(&out, "no Go toolchain", &home);
}

/// No network at all: a fresh network namespace (needs root and unshare; skipped otherwise).
#[test]
fn without_the_go_module_proxy_it_fails_at_once_naming_the_ways_out() {
    let isolated = Command::new("unshare")
        .args(["-n", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !isolated {
        eprintln!("skipped: `unshare -n` is not available to this user");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let out = run_guarded(dev("unshare", &["-n", env!("CARGO_BIN_EXE_bosun")], &home));
    assert_names_missing_and_ways_out(&out, "Go module proxy", &home);
}
