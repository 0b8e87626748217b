//! First run of `bosun dev`: installs the local control plane's binaries with
//! scripts/setup-assets.sh (built into the binary). A cold build takes minutes of silent
//! compiling, so every line the script prints is shown with the time elapsed, and while the
//! script is quiet a line every [`HEARTBEAT`] repeats the elapsed time and the current step:
//! a newcomer sees it is not stuck. On a machine that cannot build them (no Go, no Go module
//! proxy) the script stops before writing anything and the error names what is missing and
//! the two ways out.
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bosun_testenv::{Assets, TestEnvError};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

macro_rules! pin {
    ($path:literal) => {
        (
            $path,
            include_str!(concat!("../../../../../scripts/assets/", $path)),
        )
    };
}

const SETUP_SCRIPT: &str = include_str!("../../../../../scripts/setup-assets.sh");
/// The script's pins (`scripts/assets/`), written beside it: the versions and each release's
/// go.mod and go.sum. A test checks that this list is the whole directory.
const PINS: &[(&str, &str)] = &[
    pin!("versions.env"),
    pin!("kube-v1.37.1/go.mod"),
    pin!("kube-v1.37.1/go.sum"),
    pin!("kube-v1.33.13/go.mod"),
    pin!("kube-v1.33.13/go.sum"),
    pin!("kube-v1.33.13/unbuilt/sample-cli-plugin/go.mod"),
    pin!("kube-v1.33.13/unbuilt/sample-controller/go.mod"),
    pin!("etcd-v3.7.0/go.mod"),
    pin!("etcd-v3.7.0/go.sum"),
    pin!("etcd-v3.5.21/go.mod"),
    pin!("etcd-v3.5.21/go.sum"),
];
const HEARTBEAT: Duration = Duration::from_secs(20);
/// The script's own prefix, left out when a line is repeated as the current step.
const SCRIPT_PREFIX: &str = "[setup-assets] ";

/// Makes sure the control plane's binaries are there, building them on first use.
pub async fn ensure() -> anyhow::Result<()> {
    let missing = match Assets::locate(true) {
        Ok(_) => return Ok(()),
        Err(TestEnvError::AssetsMissing { missing, .. }) => missing,
        Err(e) => return Err(e.into()),
    };
    let dir = bosun_testenv::assets_dir();
    let version = bosun_testenv::selected_version()?;
    super::say(format!(
        "first run: building etcd, kube-apiserver and kube-controller-manager of Kubernetes \
         {version} from Go modules into {} (10 to 20 minutes on 2 cores with nothing cached; \
         elapsed time shown as it goes)",
        dir.display()
    ));
    let tmp = std::env::temp_dir().join(format!("bosun-setup-assets-{}", std::process::id()));
    let script = tmp.join("setup-assets.sh");
    std::fs::create_dir_all(&tmp)?;
    std::fs::write(&script, SETUP_SCRIPT)?;
    for (path, text) in PINS {
        let to = tmp.join("assets").join(path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(to, text)?;
    }
    let mut cmd = Command::new("bash");
    cmd.arg(&script).arg(version);
    let status = relay(cmd, HEARTBEAT, |line| eprintln!("    {line}")).await;
    let _ = std::fs::remove_dir_all(&tmp);
    let status = status.context("running the asset script")?;
    if !status.success() {
        anyhow::bail!(
            "the local control plane's binaries ({missing}) are missing in {} and could not be \
             built here (asset script: {status}; its output is above). Ways out:\n  \
             - put official etcd, kube-apiserver and kube-controller-manager binaries ({version}, \
             for instance an envtest set) in a directory and run with BOSUN_ASSETS=/that/dir\n  \
             - or use a cluster you already have: bosun dev --use-current-cluster (the one in \
             KUBECONFIG)",
            dir.display()
        );
    }
    Ok(())
}

/// Runs `cmd`, handing `show` each line it writes to stderr prefixed with the time elapsed,
/// and, whenever it has been quiet for `every`, a line with the time and the last step.
async fn relay(
    mut cmd: Command,
    every: Duration,
    mut show: impl FnMut(String),
) -> std::io::Result<ExitStatus> {
    let start = Instant::now();
    // stdin stays inherited so that sudo can ask for a password; stdout only names the dir.
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let Some(stderr) = child.stderr.take() else {
        return child.wait().await;
    };
    let mut lines = BufReader::new(stderr).lines();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut step = String::from("starting");
    loop {
        tokio::select! {
            line = lines.next_line() => match line? {
                Some(line) => {
                    show(format!("[{}] {line}", elapsed(start.elapsed())));
                    step = line.strip_prefix(SCRIPT_PREFIX).unwrap_or(&line).to_string();
                    tick.reset();
                }
                None => break,
            },
            _ = tick.tick() => show(format!("[{}] still at: {step}", elapsed(start.elapsed()))),
        }
    }
    child.wait().await
}

/// `3m05s`: minutes are what matter on a build of several.
fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `scripts/assets/` travels with the binary, and nothing else.
    #[test]
    fn the_pins_are_the_whole_assets_directory() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/assets");
        let mut on_disk = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("scripts/assets").flatten() {
                if e.path().is_dir() {
                    dirs.push(e.path());
                } else {
                    let rel = e.path().strip_prefix(&root).expect("under").to_owned();
                    on_disk.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = PINS.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk, "update PINS in dev/assets.rs");
        for (path, text) in PINS {
            let disk = std::fs::read_to_string(root.join(path)).expect("pin");
            assert_eq!(&disk, text, "{path}");
        }
    }

    /// The range `bosun version` states and the manager enforces is the range the suite runs.
    #[test]
    fn the_supported_range_is_the_tested_one() {
        use bosun_runtime::kubeversion::{MAX_TESTED_MINOR, MIN_MINOR};
        let minor = |v: &str| -> u32 {
            v.trim_start_matches("v1.")
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
                .expect("v1.N.P")
        };
        assert_eq!(minor(bosun_testenv::floor_version()), MIN_MINOR);
        assert_eq!(minor(bosun_testenv::current_version()), MAX_TESTED_MINOR);
    }

    #[test]
    fn elapsed_reads_as_minutes_and_seconds() {
        assert_eq!(elapsed(Duration::from_millis(900)), "0m00s");
        assert_eq!(elapsed(Duration::from_secs(65)), "1m05s");
        assert_eq!(elapsed(Duration::from_secs(8 * 60)), "8m00s");
    }

    /// The script below waits until it has been shown a heartbeat (it polls for a file the
    /// `show` callback creates on the first one), so the test needs no timing assumption; it
    /// gives up after 60 s so a missing heartbeat fails instead of hanging.
    #[tokio::test]
    async fn a_quiet_step_is_repeated_with_the_elapsed_time() {
        let dir = tempfile::tempdir().expect("tempdir");
        let flag = dir.path().join("heartbeat-seen");
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(
                r#"echo "[setup-assets] building the apiserver" >&2
                   for _ in $(seq 1200); do [ -e "$1" ] && { echo done >&2; exit 0; }; sleep 0.05; done
                   exit 7"#,
            )
            .arg("bash")
            .arg(&flag);
        let mut shown = Vec::new();
        let status = relay(cmd, Duration::from_millis(100), |line| {
            if line.contains("still at:") {
                std::fs::write(&flag, b"").expect("flag");
            }
            shown.push(line);
        })
        .await
        .expect("relay");
        assert!(status.success(), "no heartbeat within 60 s: {shown:?}");
        assert!(
            shown[0].starts_with("[0m")
                && shown[0].ends_with("] [setup-assets] building the apiserver"),
            "{shown:?}"
        );
        let beat = shown
            .iter()
            .find(|l| l.contains("still at:"))
            .expect("a heartbeat");
        assert!(
            beat.starts_with("[0m") && beat.ends_with("] still at: building the apiserver"),
            "{beat}"
        );
        assert!(
            shown.last().expect("lines").ends_with("] done"),
            "{shown:?}"
        );
    }
}
