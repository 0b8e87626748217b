//! `bosun dev` with the VmGroup operator: a local vcsim (govmomi's vSphere API simulator, a
//! real vim25 SOAP server) stands in for vCenter, the credentials Secret the operator reads
//! points at it (with vcsim's CA: TLS stays verified), and the sample group's VMs are shown
//! as vcsim has them — what vSphere holds, not what the operator believes.
use bosun_testenv::Vcsim;
use bosun_vmgroup::validate::Identity;
use bosun_vmgroup::{Settings, VmGroup};
use bosun_vsphere::{Client as VcClient, Config, Tls};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::ByteString;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;

pub const SAMPLE: &str = include_str!("../../../../../deploy/samples/vmgroup.yaml");

/// Starts vcsim and writes the Secret the operator's settings name (in their namespace, or
/// the sample's).
pub async fn start(client: &Client, sample_ns: &str) -> anyhow::Result<Vcsim> {
    let sim = Vcsim::start()?;
    let settings = Settings::from_env();
    let ns = settings.secret_namespace.as_deref().unwrap_or(sample_ns);
    let data = [
        ("VC_USER", sim.user.as_str()),
        ("VC_PASS", sim.password.as_str()),
        ("VC_HOST", sim.url.as_str()),
        ("ca.crt", sim.ca_pem()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let mut secret: Secret = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": settings.secret_name, "namespace": ns},
    }))?;
    secret.data = Some(data);
    Api::<Secret>::namespaced(client.clone(), ns)
        .patch(
            &settings.secret_name,
            &PatchParams::apply("bosun-dev").force(),
            &Patch::Apply(&secret),
        )
        .await?;
    super::say(format!(
        "vcsim (vSphere API simulator) up at {}; credentials in Secret {ns}/{}",
        sim.url, settings.secret_name
    ));
    Ok(sim)
}

/// The VMs of every VmGroup in `ns`, read from vcsim.
pub async fn show_vms(client: &Client, sim: &Vcsim, ns: &str) -> anyhow::Result<String> {
    use std::fmt::Write;
    let vc = VcClient::connect(Config::new(
        &sim.url,
        &sim.user,
        &sim.password,
        Tls::CaBundle(sim.ca_pem().as_bytes().to_vec()),
    ))
    .await?;
    let parent = Settings::from_env().parent_folder;
    let mut out = String::new();
    writeln!(
        out,
        "{:<56} {:<11} {:>4} {:>9}",
        "VM (in vcsim)", "POWER", "CPUS", "MEMORY MB"
    )?;
    for vg in Api::<VmGroup>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await?
        .items
    {
        let folder = Identity::of(&vg, &parent).folder_path;
        let Some(f) = vc.find_by_inventory_path(&folder).await? else {
            writeln!(out, "{folder}: no folder yet")?;
            continue;
        };
        let mut vms = vc.vms_in_folder(&f).await?;
        vms.sort_by(|a, b| a.name.cmp(&b.name));
        for v in vms {
            writeln!(
                out,
                "{:<56} {:<11} {:>4} {:>9}",
                format!("{folder}/{}", v.name),
                v.power_state
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "?".into()),
                v.num_cpu.map(|n| n.to_string()).unwrap_or_default(),
                v.memory_mb.map(|n| n.to_string()).unwrap_or_default()
            )?;
        }
    }
    let _ = vc.logout().await;
    Ok(out)
}
