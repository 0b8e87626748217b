//! A pod's volumes as host directories: a claim is `<root>/claims/<claim uid>` (it outlives
//! the pods that use it and goes when the claim is deleted), an `emptyDir` is a directory of
//! the pod's own, Secrets and ConfigMaps are written out as files, a `hostPath` is itself.
use std::collections::BTreeMap;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, KeyToPath, PersistentVolumeClaim, Pod, Secret,
};
use kube::{Api, ResourceExt};

use super::sandbox::User;
use super::Ctx;

/// A claim's directory.
pub fn claim_dir(root: &Path, uid: &str) -> PathBuf {
    root.join("claims").join(uid)
}

pub fn own_dir(p: &Path, user: User) -> std::io::Result<()> {
    if !p.is_dir() {
        std::fs::create_dir_all(p)?;
        chown(p, Some(user.uid), Some(user.gid))?;
    }
    Ok(())
}

/// Each volume's host path, or why the pod cannot start yet (the kubelet's `FailedMount`).
pub async fn prepare(
    ctx: &Ctx,
    pod: &Pod,
    pod_dir: &Path,
) -> Result<BTreeMap<String, PathBuf>, String> {
    let ns = pod.namespace().unwrap_or_default();
    let mut out = BTreeMap::new();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.clone());
    for v in volumes.unwrap_or_default() {
        let own = pod_dir.join("volumes").join(&v.name);
        let io = |e: std::io::Error| format!("volume {:?}: {e}", v.name);
        let path = if let Some(c) = &v.persistent_volume_claim {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
            let pvc = api
                .get_opt(&c.claim_name)
                .await
                .map_err(|e| format!("reading claim {:?}: {e}", c.claim_name))?
                .ok_or_else(|| format!("persistentvolumeclaim {:?} not found", c.claim_name))?;
            let phase = pvc.status.as_ref().and_then(|s| s.phase.as_deref());
            if pvc.metadata.deletion_timestamp.is_some() || phase != Some("Bound") {
                return Err(format!(
                    "persistentvolumeclaim {:?} is not bound (phase {})",
                    c.claim_name,
                    phase.unwrap_or("none")
                ));
            }
            let dir = claim_dir(&ctx.root, &pvc.uid().unwrap_or_default());
            own_dir(&dir, ctx.user).map_err(io)?;
            dir
        } else if v.empty_dir.is_some() {
            own_dir(&own, ctx.user).map_err(io)?;
            own
        } else if let Some(s) = &v.secret {
            let name = s.secret_name.clone().unwrap_or_default();
            let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
            let got = api
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading secret {name:?}: {e}"))?;
            let data: BTreeMap<String, Vec<u8>> = match got {
                Some(sec) => sec
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect(),
                None if s.optional == Some(true) => BTreeMap::new(),
                None => return Err(format!("secret {name:?} not found")),
            };
            write_files(&own, &data, s.items.as_deref(), s.default_mode, ctx.user)?;
            own
        } else if let Some(c) = &v.config_map {
            let name = c.name.clone();
            let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
            let got = api
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading configmap {name:?}: {e}"))?;
            let data: BTreeMap<String, Vec<u8>> = match got {
                Some(cm) => cm
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect(),
                None if c.optional == Some(true) => BTreeMap::new(),
                None => return Err(format!("configmap {name:?} not found")),
            };
            write_files(&own, &data, c.items.as_deref(), c.default_mode, ctx.user)?;
            own
        } else if let Some(h) = &v.host_path {
            PathBuf::from(&h.path)
        } else {
            return Err(format!(
                "volume {:?}: only persistentVolumeClaim, emptyDir, secret, configMap and \
                 hostPath volumes are supported by the process-mode node agent",
                v.name
            ));
        };
        out.insert(v.name.clone(), path);
    }
    Ok(out)
}

fn write_files(
    dir: &Path,
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: Option<i32>,
    user: User,
) -> Result<(), String> {
    let err = |e: std::io::Error| format!("writing {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(err)?;
    let files: Vec<(String, &Vec<u8>, Option<i32>)> = match items {
        Some(items) => items
            .iter()
            .map(|i| {
                data.get(&i.key)
                    .map(|v| (i.path.clone(), v, i.mode))
                    .ok_or_else(|| format!("key {:?} not found", i.key))
            })
            .collect::<Result<_, _>>()?,
        None => data.iter().map(|(k, v)| (k.clone(), v, None)).collect(),
    };
    for (path, value, m) in files {
        if path.split('/').any(|c| c == ".." || c.is_empty()) {
            return Err(format!("bad item path {path:?}"));
        }
        let p = dir.join(&path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        std::fs::write(&p, value).map_err(err)?;
        let mode = m.or(mode).unwrap_or(0o644) as u32;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).map_err(err)?;
        chown(&p, Some(user.uid), Some(user.gid)).map_err(err)?;
    }
    Ok(())
}

/// A container's mounts: (path in the container, host path), `subPath` included (created
/// when missing, as the kubelet does).
pub fn mounts(
    c: &Container,
    volumes: &BTreeMap<String, PathBuf>,
    user: User,
) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let base = volumes
            .get(&m.name)
            .ok_or_else(|| format!("volumeMount {:?}: no volume of that name", m.name))?;
        let host = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) if sub.split('/').any(|c| c == "..") => {
                return Err(format!("subPath {sub:?} must not contain '..'"))
            }
            Some(sub) => {
                let p = base.join(sub);
                if !p.exists() {
                    own_dir(&p, user).map_err(|e| format!("subPath {sub:?}: {e}"))?;
                }
                p
            }
            None => base.clone(),
        };
        out.push((m.mount_path.clone(), host));
    }
    Ok(out)
}
