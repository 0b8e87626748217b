//! A vcsim per test and a client verified against its CA.
use bosun_testenv::Vcsim;
use bosun_vsphere::{Client, Config, Tls};

/// The template VM vcsim's default inventory holds.
pub const TEMPLATE: &str = "/DC0/vm/DC0_H0_VM0";
/// The datacenter's VM folder.
pub const VM_FOLDER: &str = "/DC0/vm";

pub fn start() -> Vcsim {
    Vcsim::start().expect("vcsim starts (bash scripts/setup-vcsim.sh installs it)")
}

pub fn config(sim: &Vcsim) -> Config {
    Config::new(
        &sim.url,
        &sim.user,
        &sim.password,
        Tls::CaBundle(sim.ca_pem().as_bytes().to_vec()),
    )
}

pub async fn connect(sim: &Vcsim) -> Client {
    Client::connect(config(sim))
        .await
        .expect("connects to vcsim")
}
