//! `bosun dev --operators vmgroup --once` through the binary: a local control plane and a
//! vcsim, the sample VmGroup applied, and its three VMs shown as vcsim has them — powered on,
//! with the sample's 2 CPUs and 1 GB — before a clean exit. Needs vcsim
//! (`bash scripts/setup-vcsim.sh`) and the control plane assets.
use std::process::Command;

#[test]
fn dev_with_vmgroup_starts_vcsim_applies_the_sample_and_shows_its_vms() {
    let out = Command::new(env!("CARGO_BIN_EXE_bosun"))
        .args([
            "dev",
            "--operators",
            "vmgroup",
            "--once",
            "--timeout",
            "120",
        ])
        .output()
        .expect("run bosun dev");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("vcsim (vSphere API simulator) up"),
        "{stderr}"
    );
    // The server's version is shown: the lane the run is on.
    let version = bosun_testenv::selected_version().expect("lane");
    assert!(
        stderr.contains(&format!("Kubernetes {version} (bosun supports")),
        "{stderr}"
    );
    let vms: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("/DC0/vm/default_vmgroup-sample/vmgroup-sample-"))
        .collect();
    assert_eq!(vms.len(), 3, "{stdout}");
    for vm in vms {
        let fields: Vec<&str> = vm.split_whitespace().collect();
        assert_eq!(fields[1..], ["PoweredOn", "2", "1024"], "{vm}");
    }
    assert!(stdout.contains("AllVmsReady"), "{stdout}");
}
