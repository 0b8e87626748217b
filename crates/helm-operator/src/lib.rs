//! Helm-based operators: a `watches.yaml` entry with a `chart` runs that chart for every
//! custom resource of its kind — a drop-in for operator-sdk's helm-operator, on bosun's
//! runtime and renderer.
//!
//! * [`HelmFlavor::load`] parses the chart once per entry (renders reuse it);
//! * [`reconcile`] installs, upgrades, repairs and uninstalls releases;
//! * [`release`] and [`storage`] keep Helm-compatible release records (or none);
//! * [`values`], [`objects`], [`hooks`], [`ready`], [`status`]: the steps' pieces;
//! * [`crd`] and [`rbac`] say what the entry serves and needs.
pub mod chart_crds;
pub mod cluster;
pub mod crd;
pub mod diff;
pub mod error;
pub mod hooks;
pub mod objects;
pub mod rbac;
pub mod ready;
pub mod reconcile;
pub mod release;
pub mod scan;
pub mod status;
pub mod storage;
pub mod values;
pub mod values_from;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use bosun_helm::render::manifest::Manifest;
use bosun_helm::render::{Chart, RenderOptions};
use bosun_runtime::dynamic::FullKinds;
use bosun_runtime::rbac::Rbac;
use bosun_watches::{Entry, Flavor, Host, Next, Runner, WatchOperator};
use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{DynamicObject, GroupVersionKind};
use serde_json::{json, Value};

pub use error::Error;
pub use storage::Storage;

/// Options for every chart entry of a watches file.
#[derive(Clone, Debug)]
pub struct HelmOptions {
    pub storage: Storage,
    /// Revisions kept per release (Helm's `--history-max`; helm-operator-plugins' 10).
    pub max_history: usize,
    /// `.Capabilities.KubeVersion` (Helm's default when None).
    pub kube_version: Option<String>,
    /// helm-operator's `--suppress-override-values`: every override value is shown as `****`
    /// in Events. Values of Secret-like keys are masked whatever this says.
    pub suppress_override_values: bool,
}

impl Default for HelmOptions {
    fn default() -> Self {
        HelmOptions {
            storage: Storage::Secrets,
            max_history: 10,
            kube_version: None,
            suppress_override_values: false,
        }
    }
}

/// A chart entry, loaded.
pub struct HelmFlavor {
    pub chart: Arc<Chart>,
    pub storage: Storage,
    pub max_history: usize,
    pub kube_version: Option<String>,
    /// The entry's `overrideValues`, executed once at load ([`values::executed`]).
    pub overrides: std::collections::BTreeMap<String, String>,
    /// See [`HelmOptions::suppress_override_values`].
    pub suppress_override_values: bool,
    /// What a person should know about the entry's chart (RBAC the scan cannot derive).
    pub warnings: Vec<String>,
    /// `.Capabilities` of the cluster the operator runs against (set up on first render).
    pub cluster: std::sync::OnceLock<cluster::ClusterView>,
    /// The chart as release records carry it (metadata, values, schema; no templates).
    pub chart_record: Value,
    crd: CustomResourceDefinition,
    rbac: Rbac,
    /// The kinds of the release objects the chart renders with its defaults: their child
    /// caches start with the controller ([`Flavor::warm_kinds`]).
    warm: Vec<GroupVersionKind>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{entry}: chart {path}: {message}")]
    Chart {
        entry: String,
        path: String,
        message: String,
    },
    #[error("{entry}: not a chart entry (it runs {runner})")]
    NotAChart { entry: String, runner: String },
}

fn metadata_json(m: &bosun_helm::chart::metadata::Metadata) -> Value {
    let mut o = serde_json::Map::new();
    let mut put = |k: &str, v: &str| {
        if !v.is_empty() {
            o.insert(k.into(), json!(v));
        }
    };
    put("name", &m.name);
    put("version", &m.version);
    put("description", &m.description);
    put("apiVersion", &m.api_version);
    put("appVersion", &m.app_version);
    put("kubeVersion", &m.kube_version);
    put("type", &m.chart_type);
    put("home", &m.home);
    put("icon", &m.icon);
    if !m.keywords.is_empty() {
        o.insert("keywords".into(), json!(m.keywords));
    }
    if !m.sources.is_empty() {
        o.insert("sources".into(), json!(m.sources));
    }
    if !m.annotations.is_empty() {
        o.insert("annotations".into(), json!(m.annotations));
    }
    if m.deprecated {
        o.insert("deprecated".into(), json!(true));
    }
    Value::Object(o)
}

impl HelmFlavor {
    /// Loads the entry's chart (once: every render reuses it) and derives its CRD and RBAC.
    pub fn load(entry: &Entry, opts: &HelmOptions) -> Result<HelmFlavor, LoadError> {
        let Runner::Chart(path) = &entry.runner else {
            return Err(LoadError::NotAChart {
                entry: entry.describe(),
                runner: format!("{:?}", entry.runner),
            });
        };
        let err = |message: String| LoadError::Chart {
            entry: entry.describe(),
            path: path.display().to_string(),
            message,
        };
        let chart = Chart::load(path).map_err(|e| err(e.to_string()))?;
        let overrides = values::executed(&entry.override_values).map_err(|e| err(e.to_string()))?;
        let node = bosun_helm::chart::load::load(path).map_err(|e| err(e.to_string()))?;
        let schema: Option<Value> = match &node.schema {
            Some(bytes) => Some(
                serde_json::from_slice(bytes)
                    .map_err(|e| err(format!("values.schema.json: {e}")))?,
            ),
            None => None,
        };
        let values = chart.default_values().clone();
        let spec_schema = crd::spec_schema(&values, schema.as_ref());
        let crd = crd::crd(
            &entry.gvk,
            spec_schema,
            &format!(
                "Values of the {} chart (its values.yaml is the default).",
                chart.name()
            ),
        )
        .map_err(|e| err(format!("CRD: {e}")))?;
        let RenderedKinds {
            mut kinds,
            has_crds,
            grants,
            objects: warm,
        } = rendered_kinds(&chart, entry, opts)?;
        // Kinds behind conditions the default values leave off need their RBAC too.
        let scanned = scan::scan(&node);
        kinds.extend(scanned.kinds);
        let rbac = rbac::extensions(
            rbac::rbac(&entry.gvk, &kinds, has_crds, opts.storage, &grants),
            entry,
            has_crds,
        );
        let chart_record = json!({
            "metadata": metadata_json(&node.meta),
            "lock": null,
            "templates": [],
            "values": crd::data_json(&values),
            "schema": node.schema.as_ref().map(|b| base64_of(b)),
            "files": [],
        });
        Ok(HelmFlavor {
            chart: Arc::new(chart),
            storage: opts.storage,
            max_history: opts.max_history.max(1),
            kube_version: opts.kube_version.clone(),
            suppress_override_values: opts.suppress_override_values,
            overrides,
            warnings: scanned.warnings,
            cluster: Default::default(),
            chart_record,
            crd,
            rbac,
            warm,
        })
    }

    /// The entry as an operator.
    pub fn operator(
        entry: Entry,
        opts: &HelmOptions,
    ) -> Result<WatchOperator<HelmFlavor>, LoadError> {
        let flavor = HelmFlavor::load(&entry, opts)?;
        Ok(WatchOperator::new(entry, flavor))
    }
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// What a chart renders with its default values (hooks included), for its RBAC.
struct RenderedKinds {
    /// (group, kind) of every object.
    kinds: BTreeSet<(String, String)>,
    /// Whether it has `crds/`.
    has_crds: bool,
    /// What its RBAC objects need the operator to hold.
    grants: rbac::ChartGrants,
    /// The kinds of its release objects (hooks apart: they are not cached), the entry's own
    /// kind apart.
    objects: Vec<GroupVersionKind>,
}

fn rendered_kinds(
    chart: &Chart,
    entry: &Entry,
    opts: &HelmOptions,
) -> Result<RenderedKinds, LoadError> {
    let mut ro = RenderOptions::new("release-name", "default");
    ro.kube_version = opts.kube_version.clone();
    let mut kinds = BTreeSet::new();
    let rendered = match chart.render(&ro) {
        Ok(r) => r,
        // A chart that needs values to render (`required`) still gets its CR kind's rules.
        Err(e) => {
            tracing::warn!(entry = %entry.describe(), error = %e, "chart does not render with its defaults; RBAC covers what it renders then");
            return Ok(RenderedKinds {
                kinds,
                has_crds: false,
                grants: Default::default(),
                objects: Vec::new(),
            });
        }
    };
    let (generic, hooks) =
        bosun_helm::render::manifest::sort_manifests(&rendered).map_err(|e| LoadError::Chart {
            entry: entry.describe(),
            path: String::new(),
            message: e.to_string(),
        })?;
    for m in generic.iter().chain(&hooks) {
        let gvk = objects::gvk_of(&m.api_version, &m.kind);
        kinds.insert((gvk.group, gvk.kind));
    }
    let mut children: Vec<GroupVersionKind> = Vec::new();
    for m in &generic {
        let gvk = objects::gvk_of(&m.api_version, &m.kind);
        if gvk != entry.gvk && !children.contains(&gvk) {
            children.push(gvk);
        }
    }
    let all: Vec<&Manifest> = generic.iter().chain(&hooks).collect();
    Ok(RenderedKinds {
        kinds,
        has_crds: !rendered.crds.is_empty(),
        grants: rbac::chart_grants(&all),
        objects: children,
    })
}

impl Flavor for HelmFlavor {
    type Error = Error;
    const PERIOD_ANNOTATION: &'static str = reconcile::PERIOD_ANNOTATION;
    const MANAGER: &'static str = "bosun-helm";
    /// helm-operator's `--reconcile-period` default.
    const DEFAULT_PERIOD: Option<std::time::Duration> = Some(std::time::Duration::from_secs(60));

    fn crd(&self) -> CustomResourceDefinition {
        self.crd.clone()
    }

    fn rbac(&self) -> Rbac {
        self.rbac.clone()
    }

    /// helm-operator's annotations (`upgrade-force`, `reconcile-period`, ...) are read on
    /// every reconcile, so their changes trigger one.
    fn watches_annotations(&self) -> bool {
        true
    }

    fn finalizer(&self) -> Option<&str> {
        Some(reconcile::FINALIZER)
    }

    fn warm_kinds(&self) -> Vec<GroupVersionKind> {
        self.warm.clone()
    }

    /// helm-operator's dependent predicate ignores creates, and so does bosun: the install
    /// that created a child already recorded what the new child's readiness can say
    /// (`ready::created`), so its first sighting would only run the render again (≈1000
    /// reconciles that wrote nothing at 1000 CRs). A workload's status changes still
    /// trigger its owner (its readiness), as do a child's edits and deletion.
    fn child_creates_trigger(&self) -> bool {
        false
    }

    /// helm-operator re-applies every object of the release each reconcile period; bosun
    /// compares what its field manager owns with the render and writes only what drifted.
    fn repairs_drift(&self) -> bool {
        true
    }

    /// The custom resources are cached packed ([`bosun_watches::packed`]): their spec and status as JSON
    /// text, which the reconcile parses back.
    fn slim_primary(&self) -> Option<fn(&mut DynamicObject)> {
        Some(bosun_watches::packed::pack)
    }

    /// Children's metadata is cached slimmed to what the reconcile reads
    /// ([`objects::slim_meta`]).
    fn slim_child_meta(&self) -> Option<fn(&mut ObjectMeta)> {
        Some(objects::slim_meta)
    }

    fn full_kinds(&self) -> Option<FullKinds> {
        Some(FullKinds {
            is_full: ready::is_tracked,
            slim: ready::slim,
        })
    }

    /// `valuesFrom`: a change of a source re-reconciles the custom resources that read it.
    fn triggers(
        &self,
        client: &kube::Client,
        entry: &Entry,
        ns: Option<&str>,
        resource: &kube::core::ApiResource,
        primaries: kube::runtime::reflector::Store<DynamicObject>,
    ) -> Vec<bosun_runtime::controller::Trigger<DynamicObject>> {
        values_from::triggers(client, &entry.values_from, ns, resource, primaries)
    }

    fn reconcile(
        obj: Arc<DynamicObject>,
        host: Arc<Host<Self>>,
    ) -> BoxFuture<'static, Result<Next, Error>> {
        Box::pin(reconcile::reconcile(obj, host))
    }
}

/// Loads every chart entry of a watches file.
pub fn operators(
    entries: &[Entry],
    opts: &HelmOptions,
) -> Result<Vec<WatchOperator<HelmFlavor>>, LoadError> {
    entries
        .iter()
        .filter(|e| matches!(e.runner, Runner::Chart(_)))
        .map(|e| HelmFlavor::operator(e.clone(), opts))
        .collect()
}

/// True when `path` is a chart directory or archive.
pub fn is_chart(path: &Path) -> bool {
    path.join("Chart.yaml").is_file() || path.extension().is_some_and(|e| e == "tgz")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry_of(dir: &Path, extra: &str) -> Result<bosun_watches::WatchesFile, String> {
        let chart = dir.join("web");
        std::fs::create_dir_all(chart.join("templates")).expect("mkdir");
        std::fs::write(
            chart.join("Chart.yaml"),
            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
        )
        .expect("Chart.yaml");
        let w = dir.join("watches.yaml");
        std::fs::write(
            &w,
            format!("- group: test.bosun.dev\n  version: v1\n  kind: Web\n  chart: web\n{extra}"),
        )
        .expect("watches");
        bosun_watches::WatchesFile::load(&w).map_err(|e| e.to_string())
    }

    /// The extensions read from watches.yaml: Flux's shape, defaults, and refusals that name
    /// the field; their RBAC follows.
    #[test]
    fn the_extensions_are_read_with_flux_shape_and_get_their_rbac() {
        use bosun_watches::{ValuesFrom, ValuesSourceKind};
        let dir = tempfile::tempdir().expect("dir");
        let file = entry_of(
            dir.path(),
            "  upgradeCRDs: true\n  valuesFrom:\n  - {kind: Secret, name: creds, valuesKey: v.yaml}\n  - {kind: ConfigMap, name: shared, optional: true}\n",
        )
        .expect("valid");
        assert!(file.warnings.is_empty(), "{:?}", file.warnings);
        let e = &file.entries[0];
        assert!(e.upgrade_crds);
        assert_eq!(
            e.values_from,
            [
                ValuesFrom {
                    kind: ValuesSourceKind::Secret,
                    name: "creds".into(),
                    values_key: "v.yaml".into(),
                    optional: false
                },
                ValuesFrom {
                    kind: ValuesSourceKind::ConfigMap,
                    name: "shared".into(),
                    values_key: "values.yaml".into(),
                    optional: true
                }
            ]
        );
        let rules = rbac::extensions(Rbac::default(), e, true);
        let text = serde_json::to_string(&(&rules.namespaced, &rules.cluster)).expect("json");
        assert!(text.contains("\"configmaps\",\"secrets\""), "{text}");
        assert!(text.contains("\"patch\""), "{text}");
        let plain = entry_of(dir.path(), "").expect("valid");
        assert!(!plain.entries[0].upgrade_crds && plain.entries[0].values_from.is_empty());
        assert_eq!(
            rbac::extensions(Rbac::default(), &plain.entries[0], true),
            Rbac::default(),
            "nothing more without the extensions"
        );
        for (bad, says) in [
            (
                "  valuesFrom:\n  - {kind: Pod, name: x}\n",
                "valuesFrom[0].kind: expected Secret or ConfigMap, not \"Pod\"",
            ),
            (
                "  valuesFrom:\n  - {kind: Secret}\n",
                "valuesFrom[0]: name is required",
            ),
            (
                "  valuesFrom:\n  - {kind: Secret, name: x, targetPath: a.b}\n",
                "valuesFrom[0].targetPath: not supported",
            ),
            (
                "  valuesFrom: {kind: Secret}\n",
                "valuesFrom: expected a list",
            ),
            (
                "  upgradeCRDs: yes please\n",
                "upgradeCRDs: expected true or false",
            ),
        ] {
            let e = entry_of(dir.path(), bad).expect_err(bad);
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A kind only a value turns on (the `helm create` scaffold's Ingress) gets its RBAC: a
    /// default-values render alone left it out, and the install then failed with 403.
    #[test]
    fn rbac_covers_kinds_behind_values_the_defaults_leave_off() {
        let dir = tempfile::tempdir().expect("dir");
        let chart = dir.path().join("web");
        std::fs::create_dir_all(chart.join("templates")).expect("mkdir");
        std::fs::write(
            chart.join("Chart.yaml"),
            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
        )
        .expect("Chart.yaml");
        std::fs::write(chart.join("values.yaml"), "ingress:\n  enabled: false\n").expect("values");
        std::fs::write(
            chart.join("templates/ingress.yaml"),
            "{{- if .Values.ingress.enabled }}\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {{ .Release.Name }}\n{{- end }}\n",
        )
        .expect("template");
        let w = dir.path().join("watches.yaml");
        std::fs::write(
            &w,
            "- {group: test.bosun.dev, version: v1, kind: Web, chart: web}\n",
        )
        .expect("watches");
        let file = bosun_watches::WatchesFile::load(&w).expect("watches");
        let flavor = HelmFlavor::load(&file.entries[0], &HelmOptions::default()).expect("load");
        let rules = serde_json::to_string(&flavor.rbac().namespaced).expect("json");
        assert!(rules.contains("\"ingresses\""), "{rules}");
        assert!(flavor.warnings.is_empty(), "{:?}", flavor.warnings);
    }
}
