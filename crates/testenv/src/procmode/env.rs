//! A container's environment as the kubelet builds it: the image's `ENV`, `HOSTNAME`, then
//! `envFrom` and `env` in order — literal values with `$(VAR)` expansion, the downward API's
//! `fieldRef`, `secretKeyRef` and `configMapKeyRef` read from the API server. Errors name the
//! object and key, never a value.
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use k8s_openapi::ByteString;
use kube::{Api, Client, ResourceExt};

pub struct PodFacts<'a> {
    pub pod: &'a Pod,
    pub pod_ip: &'a str,
    pub host_ip: &'a str,
}

/// The ordered environment of `container`, or why it cannot be built (the kubelet's
/// `CreateContainerConfigError`).
pub async fn build(
    client: &Client,
    facts: &PodFacts<'_>,
    container: &Container,
    image_env: &[(String, String)],
) -> Result<Vec<(String, String)>, String> {
    let ns = facts.pod.namespace().unwrap_or_default();
    let mut env: Vec<(String, String)> = image_env.to_vec();
    set(&mut env, "HOSTNAME", facts.pod.name_any());
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        if let Some(r) = &from.secret_ref {
            let optional = r.optional.unwrap_or(false);
            match secret(client, &ns, &r.name).await? {
                Some(s) => {
                    for (k, v) in s.data.unwrap_or_default() {
                        set(&mut env, &format!("{prefix}{k}"), utf8(&v));
                    }
                }
                None if optional => {}
                None => return Err(format!("secret \"{}\" not found", r.name)),
            }
        }
        if let Some(r) = &from.config_map_ref {
            let optional = r.optional.unwrap_or(false);
            match config_map(client, &ns, &r.name).await? {
                Some(c) => {
                    for (k, v) in c.data.unwrap_or_default() {
                        set(&mut env, &format!("{prefix}{k}"), v);
                    }
                }
                None if optional => {}
                None => return Err(format!("configmap \"{}\" not found", r.name)),
            }
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => {
                let defined: BTreeMap<&str, &str> =
                    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                expand(var.value.as_deref().unwrap_or(""), &defined)
            }
            Some(from) => {
                if let Some(f) = &from.field_ref {
                    field(facts, &f.field_path)?
                } else if let Some(k) = &from.secret_key_ref {
                    let optional = k.optional.unwrap_or(false);
                    let s = secret(client, &ns, &k.name).await?;
                    match s.and_then(|s| s.data).and_then(|mut d| d.remove(&k.key)) {
                        Some(v) => utf8(&v),
                        None if optional => continue,
                        None => {
                            return Err(format!(
                                "couldn't find key {} in Secret {ns}/{}",
                                k.key, k.name
                            ))
                        }
                    }
                } else if let Some(k) = &from.config_map_key_ref {
                    let optional = k.optional.unwrap_or(false);
                    let c = config_map(client, &ns, &k.name).await?;
                    match c.and_then(|c| c.data).and_then(|mut d| d.remove(&k.key)) {
                        Some(v) => v,
                        None if optional => continue,
                        None => {
                            return Err(format!(
                                "couldn't find key {} in ConfigMap {ns}/{}",
                                k.key, k.name
                            ))
                        }
                    }
                } else {
                    return Err(format!(
                        "env {}: resourceFieldRef is not supported by the process-mode node agent",
                        var.name
                    ));
                }
            }
        };
        set(&mut env, &var.name, value);
    }
    Ok(env)
}

fn set(env: &mut Vec<(String, String)>, key: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(e) => e.1 = value,
        None => env.push((key.to_string(), value)),
    }
}

fn utf8(b: &ByteString) -> String {
    String::from_utf8_lossy(&b.0).into_owned()
}

async fn secret(client: &Client, ns: &str, name: &str) -> Result<Option<Secret>, String> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading secret {ns}/{name}: {e}"))
}

async fn config_map(client: &Client, ns: &str, name: &str) -> Result<Option<ConfigMap>, String> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading configmap {ns}/{name}: {e}"))
}

/// The downward API's field paths.
fn field(facts: &PodFacts<'_>, path: &str) -> Result<String, String> {
    let pod = facts.pod;
    let keyed = |prefix: &str, map: &BTreeMap<String, String>| -> Option<String> {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map.get(key).cloned().unwrap_or_default())
    };
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => pod.name_any(),
        "metadata.namespace" => pod.namespace().unwrap_or_default(),
        "metadata.uid" => pod.uid().unwrap_or_default(),
        "status.podIP" | "status.podIPs" => facts.pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => facts.host_ip.to_string(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into()),
        _ => keyed("metadata.labels['", pod.labels())
            .or_else(|| keyed("metadata.annotations['", pod.annotations()))
            .ok_or_else(|| format!("unsupported downward API field path {path:?}"))?,
    })
}

/// Kubernetes' `$(VAR)` expansion: a defined variable is replaced, `$$` is a literal `$`, and
/// anything else is kept as written.
pub fn expand(s: &str, defined: &BTreeMap<&str, &str>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match defined.get(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_the_kubelet() {
        let defined: BTreeMap<&str, &str> = [("POD_IP", "127.1.0.1"), ("EMPTY", "")].into();
        let e = |s| expand(s, &defined);
        assert_eq!(e("listen=$(POD_IP):5432"), "listen=127.1.0.1:5432");
        assert_eq!(e("$(MISSING)-$(EMPTY)"), "$(MISSING)-");
        assert_eq!(e("$$(POD_IP) $$ $x $(open"), "$(POD_IP) $ $x $(open");
        assert_eq!(e("no vars"), "no vars");
    }
}
