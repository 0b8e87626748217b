//! `bosun dev` with the PostgresCluster operator: the node agent runs in process mode, so
//! every instance is a real PostgreSQL process on its own loopback pod IP (the `bosun`
//! binary running this command is the image the pods' instance manager comes from). Once the
//! sample cluster is ready, its instances are shown and a `psql` command for the primary is
//! printed; the password goes to a `pgpass` file beside the kubeconfig (removed with the
//! control plane), never to the terminal.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bosun_postgres::api::PostgresCluster;
use bosun_testenv::{ImageMap, NodeAgent, ProcessConfig};
use kube::api::Api;
use kube::Client;

pub const SAMPLE: &str = include_str!("../../../../../deploy/samples/postgres.yaml");

/// The process-mode node agent, for every namespace.
pub fn agent(client: Client) -> anyhow::Result<NodeAgent> {
    let bosun = std::env::current_exe()?;
    NodeAgent::process_mode(
        client,
        ProcessConfig {
            images: ImageMap::standard(Some(bosun)),
            ..Default::default()
        },
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "the process-mode node agent (PostgreSQL runs as real processes) cannot start: {e}; it needs root and PostgreSQL (bash scripts/setup-postgres.sh)"
        )
    })
}

/// A pgpass line for every host: `*:5432:*:postgres:<password>` with `:` and `\` escaped.
fn pgpass_line(password: &str) -> String {
    let escaped = password.replace('\\', "\\\\").replace(':', "\\:");
    format!("*:5432:*:postgres:{escaped}\n")
}

fn write_pgpass(dir: &Path, password: &str) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("pgpass");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)?;
    f.write_all(pgpass_line(password).as_bytes())?;
    Ok(path)
}

/// The sample's instances and, with `pgpass_dir` (a local control plane), a `psql` command
/// for the primary.
pub async fn show(
    client: &Client,
    ns: &str,
    name: &str,
    pgpass_dir: Option<&Path>,
) -> anyhow::Result<String> {
    let pc = Api::<PostgresCluster>::namespaced(client.clone(), ns)
        .get(name)
        .await?;
    let st = pc.status.unwrap_or_default();
    let mut out = String::new();
    writeln!(
        out,
        "{:<28} {:<8} {:<6} {:<9} {:<12} POD-IP",
        "INSTANCE", "ROLE", "READY", "TIMELINE", "LSN"
    )?;
    for i in &st.instances {
        writeln!(
            out,
            "{:<28} {:<8} {:<6} {:<9} {:<12} {}",
            i.name,
            i.role,
            i.ready,
            i.timeline.map(|t| t.to_string()).unwrap_or_default(),
            i.lsn.as_deref().unwrap_or(""),
            i.pod_ip.as_deref().unwrap_or("")
        )?;
    }
    let primary_ip = st
        .current_primary
        .as_deref()
        .and_then(|p| st.instances.iter().find(|i| i.name == p))
        .and_then(|i| i.pod_ip.clone());
    if let (Some(dir), Some(ip)) = (pgpass_dir, primary_ip) {
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
        let secret = secrets
            .get(&bosun_postgres::controller::build::secret_name(name))
            .await?;
        let password = secret
            .data
            .as_ref()
            .and_then(|d| d.get(bosun_postgres::controller::build::KEY_SUPERUSER))
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .ok_or_else(|| anyhow::anyhow!("the credentials Secret has no superuser password"))?;
        let pgpass = write_pgpass(dir, &password)?;
        writeln!(
            out,
            "\nthe primary ({}), with real PostgreSQL:\n  PGPASSFILE={} psql -h {ip} -U postgres postgres",
            st.current_primary.as_deref().unwrap_or(""),
            pgpass.display()
        )?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgpass_escapes_colons_and_backslashes() {
        assert_eq!(pgpass_line(r"a:b\c"), "*:5432:*:postgres:a\\:b\\\\c\n");
    }
}
