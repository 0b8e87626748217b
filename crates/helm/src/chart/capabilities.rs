//! `.Capabilities`: the Kubernetes version, the API versions the cluster serves and
//! the Helm version, shaped and printed as Helm v4's `common.Capabilities`.
use std::rc::Rc;

use crate::value::object::{Method, Object, Ty};
use crate::value::{Kind, List, ListKind, Value};

/// Helm's default Kubernetes version when none is given (the engine Helm was built with).
pub const DEFAULT_KUBE_VERSION: &str = "v1.36.0";

/// What `.Capabilities.HelmVersion` reports: the Helm engine bosun matches
/// (helm-python-sdk 0.2.2's libhelm, Helm v4.2.3 as built there).
pub const HELM_VERSION: [&str; 5] = ["v4.2", "", "", "go1.26.6", "v1.36"];

/// Helm's default API versions (`common.DefaultVersionSet`), in Helm's order.
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "certificates.k8s.io/v1alpha1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1alpha1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha2",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storagemigration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
];

/// `Has` on a `common.VersionSet`.
pub fn version_set_method(l: &Rc<List>, name: &str) -> Option<Method> {
    if name != "Has" {
        return None;
    }
    let l = l.clone();
    Some(Method::new(&[Ty::Str], move |a| {
        let want = a.first().and_then(Value::as_str).unwrap_or("");
        Ok(Value::Bool(
            l.items.iter().any(|x| x.as_str() == Some(want)),
        ))
    }))
}

/// `common.KubeVersion`.
#[derive(Clone, Debug)]
pub struct KubeVersion {
    /// As given, with a leading `v` (`v1.33.4-gke.1245000`): `.Version`, `.GitVersion`.
    pub version: String,
    /// Only the numeric components (`v1.33.4`): what `String()` prints.
    pub normalized: String,
    pub major: String,
    pub minor: String,
}

impl KubeVersion {
    /// Helm's `ParseKubeVersion`: Kubernetes' generic version parser (`ParseGeneric`:
    /// optional spaces and `v`, two or more numeric components, anything after them
    /// ignored), the input kept as the version (a `v` added when missing).
    pub fn parse(s: &str) -> Result<KubeVersion, String> {
        let illegal = || format!("invalid kube version {s:?}: illegal version string {s:?}");
        let body = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0c']);
        let body = body.strip_prefix('v').unwrap_or(body);
        let numbers_end = body
            .char_indices()
            .scan(true, |digit_expected, (i, c)| {
                // Components are digits separated by single dots; a dot must be followed
                // by a digit to belong to the version.
                let ok = c.is_ascii_digit() || (c == '.' && !*digit_expected);
                *digit_expected = c == '.';
                ok.then_some(i + c.len_utf8())
            })
            .last()
            .unwrap_or(0);
        let numbers = body[..numbers_end].trim_end_matches('.');
        let parts: Vec<&str> = numbers.split('.').collect();
        if numbers.is_empty() || parts.len() < 2 {
            return Err(illegal());
        }
        let mut components = Vec::with_capacity(parts.len());
        for (i, p) in parts.iter().enumerate() {
            if i == 0 && p.len() > 1 && p.starts_with('0') {
                return Err(format!(
                    "invalid kube version {s:?}: illegal zero-prefixed version component {p:?} in {s:?}"
                ));
            }
            let n: u64 = p.parse().map_err(|e| {
                format!("invalid kube version {s:?}: illegal version string {s:?}: {e}")
            })?;
            components.push(n.to_string());
        }
        let version = if s.starts_with('v') {
            s.to_string()
        } else {
            format!("v{s}")
        };
        Ok(KubeVersion {
            version,
            normalized: format!("v{}", components.join(".")),
            major: components[0].clone(),
            minor: components[1].clone(),
        })
    }
}

impl Object for KubeVersion {
    fn type_name(&self) -> &str {
        "common.KubeVersion"
    }
    fn kind(&self) -> Kind {
        Kind::Struct
    }
    fn field_names(&self) -> &'static [&'static str] {
        &["Version", "Major", "Minor"]
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Version" => Some(Value::string(self.version.clone())),
            "Major" => Some(Value::string(self.major.clone())),
            "Minor" => Some(Value::string(self.minor.clone())),
            _ => None,
        }
    }
    fn print_fields(&self) -> Vec<Value> {
        vec![
            Value::string(self.version.clone()),
            Value::string(self.normalized.clone()),
            Value::string(self.major.clone()),
            Value::string(self.minor.clone()),
        ]
    }
    fn method(&self, name: &str) -> Option<Method> {
        let v = match name {
            "GitVersion" => self.version.clone(),
            "String" => self.normalized.clone(),
            _ => return None,
        };
        Some(Method::new(&[], move |_| Ok(Value::string(v.clone()))))
    }
    fn stringer(&self, top: bool) -> Option<String> {
        // String() has a pointer receiver: fmt uses it only on an addressable value.
        top.then(|| self.normalized.clone())
    }
    fn json_value(&self) -> Option<Value> {
        let m = crate::value::Map::new(crate::value::MapKind::Iface);
        m.insert("version".into(), Value::string(self.version.clone()));
        m.insert("major".into(), Value::string(self.major.clone()));
        m.insert("minor".into(), Value::string(self.minor.clone()));
        Some(Value::Map(m))
    }
}

/// Prints like Go prints the struct (its unexported normalized version included).
struct KubeVersionPrint(KubeVersion);

/// `version.BuildInfo`.
#[derive(Clone, Debug)]
pub struct HelmVersion;

impl Object for HelmVersion {
    fn type_name(&self) -> &str {
        "version.BuildInfo"
    }
    fn kind(&self) -> Kind {
        Kind::Struct
    }
    fn field_names(&self) -> &'static [&'static str] {
        &[
            "Version",
            "GitCommit",
            "GitTreeState",
            "GoVersion",
            "KubeClientVersion",
        ]
    }
    fn field(&self, name: &str) -> Option<Value> {
        let i = self.field_names().iter().position(|f| *f == name)?;
        Some(Value::str(HELM_VERSION[i]))
    }
}

/// `*common.Capabilities`.
pub struct Capabilities {
    pub kube: KubeVersion,
    pub api_versions: Vec<String>,
}

impl Object for Capabilities {
    fn type_name(&self) -> &str {
        "*common.Capabilities"
    }
    fn kind(&self) -> Kind {
        Kind::Ptr
    }
    fn field_names(&self) -> &'static [&'static str] {
        &["KubeVersion", "APIVersions", "HelmVersion"]
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "KubeVersion" => Some(Value::Obj(Rc::new(self.kube.clone()))),
            "APIVersions" => Some(Value::list(
                ListKind::VersionSet,
                self.api_versions.iter().map(|s| Value::str(s)).collect(),
            )),
            "HelmVersion" => Some(Value::Obj(Rc::new(HelmVersion))),
            _ => None,
        }
    }
    fn stringer(&self, top: bool) -> Option<String> {
        // Helm prints the struct: {{KubeVersion} [APIs] {HelmVersion}}.
        let _ = top;
        let k = &self.kube;
        Some(format!(
            "{{{{{} {} {} {}}} [{}] {{{}}}}}",
            k.version,
            k.normalized,
            k.major,
            k.minor,
            self.api_versions.join(" "),
            HELM_VERSION.join(" ")
        ))
    }
}

impl KubeVersionPrint {
    #[allow(dead_code)]
    fn text(&self) -> String {
        format!(
            "{{{} {} {} {}}}",
            self.0.version, self.0.normalized, self.0.major, self.0.minor
        )
    }
}

/// The API version set Helm builds from discovery (`action.GetVersionSet`): each served
/// `group/version` (`v1` for the core group), then each `group/version/Kind`, once each,
/// for [`RenderOptions::cluster_api_versions`](crate::render::RenderOptions).
/// `served` pairs each group/version with the kinds of *every* resource discovery lists
/// for it — subresources included, as Helm takes them (`deployments/scale` adds
/// `apps/v1/Scale`). Helm's order is a Go map's, so any order is Helm's. Helm keeps
/// its default list when discovery returns nothing at all (pass `None` then), and
/// tolerates groups whose discovery failed (pass what was read).
pub fn version_set<'a>(served: impl IntoIterator<Item = (&'a str, Vec<&'a str>)>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    let mut versions = Vec::new();
    let mut kinds = Vec::new();
    for (gv, ks) in served {
        if seen.insert(gv.to_string()) {
            versions.push(gv.to_string());
        }
        for k in ks {
            let id = format!("{gv}/{k}");
            if seen.insert(id.clone()) {
                kinds.push(id);
            }
        }
    }
    versions.extend(kinds);
    versions
}
