//! The helm plugin (`helm.sdk.operatorframework.io/v1`): `init` and `create api`, each
//! planned as a [`Tree`] (pure), then staged, completed with what [`Derive`] says about the
//! staged watches file, and committed.
pub mod config;
pub mod top;

use std::path::{Path, PathBuf};

use crate::chart::ChartSource;
use crate::files::{Stage, Tree};
use crate::project::{Project, Resource, HELM_LAYOUT};
use crate::{names, watches, Derive, Derived, Error};
use config::KindRef;

pub const DEFAULT_GROUP: &str = "charts";
pub const DEFAULT_VERSION: &str = "v1alpha1";
/// kubebuilder's default `--domain`.
pub const DEFAULT_DOMAIN: &str = "my.domain";

/// The files of `config/rbac/` that hold `bosun rbac`'s objects, in the order it prints them.
pub const RBAC_FILES: [&str; 5] = [
    "config/rbac/role.yaml",
    "config/rbac/role_binding.yaml",
    "config/rbac/metrics_reader_role.yaml",
    "config/rbac/leader_election_role.yaml",
    "config/rbac/leader_election_role_binding.yaml",
];

#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    pub domain: Option<String>,
    pub project_name: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ApiOptions {
    pub group: Option<String>,
    pub version: Option<String>,
    pub kind: Option<String>,
    /// A chart directory or `.tgz`.
    pub helm_chart: Option<PathBuf>,
}

/// What `init` writes before the RBAC is derived.
pub fn plan_init(project: &str, domain: &str) -> Tree {
    let mut t = Tree::default();
    let p = Project {
        domain: domain.to_string(),
        layout: vec![HELM_LAYOUT.to_string()],
        multigroup: false,
        project_name: project.to_string(),
        resources: vec![],
    };
    t.put("PROJECT", p.render());
    t.put("watches.yaml", watches::initial());
    t.put("Dockerfile", top::dockerfile());
    t.put("Makefile", top::makefile(project, domain));
    t.put(".gitignore", top::gitignore());
    t.put(
        "config/rbac/kustomization.yaml",
        config::rbac_kustomization(&[]),
    );
    t.dirs.push("helm-charts".into());
    t.extend(config::init(project));
    t
}

/// `bosun init --plugins helm` in `dir` (which must be empty but for dotfiles).
pub fn init(dir: &Path, opts: &InitOptions, derive: &dyn Derive) -> Result<Vec<String>, Error> {
    let domain = opts.domain.as_deref().unwrap_or(DEFAULT_DOMAIN);
    names::check_subdomain("domain", domain)?;
    let project = match &opts.project_name {
        Some(p) => p.clone(),
        None => dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default(),
    };
    names::check_project_name(&project)?;
    std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
    let found: Vec<String> = std::fs::read_dir(dir)
        .map_err(Error::io(dir))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    if !found.is_empty() {
        let mut found = found;
        found.sort();
        return Err(Error::NotEmpty {
            dir: dir.to_path_buf(),
            found: found.join(", "),
        });
    }
    let mut tree = plan_init(&project, domain);
    let stage = Stage::new(dir)?;
    stage.write(&tree)?;
    let derived = derive
        .derive(None, &config::namespace(&project))
        .map_err(Error::Derive)?;
    let extra = derived_files(&derived)?;
    stage.write(&extra)?;
    tree.extend(extra);
    stage.commit(&tree)?;
    Ok(vec![
        "Writing kustomize manifests for you to edit...".into(),
        "Writing scaffold for you to edit...".into(),
        "Next: define a resource with:\n$ bosun create api".into(),
    ])
}

/// `bosun create api` in the project at `dir`.
pub fn create_api(
    dir: &Path,
    opts: &ApiOptions,
    derive: &dyn Derive,
) -> Result<Vec<String>, Error> {
    let mut project = Project::read(dir)?;
    if !project.layout.iter().any(|l| l == HELM_LAYOUT) {
        return Err(Error::WrongPlugin {
            layout: project.layout.join(","),
            plugin: HELM_LAYOUT.into(),
        });
    }
    let chart = match (&opts.helm_chart, &opts.kind) {
        (Some(path), _) => ChartSource::load(path)?,
        (None, Some(kind)) => {
            names::check_kind(kind)?;
            ChartSource::new_for(kind)
        }
        (None, None) => return Err(Error::NothingToCreate),
    };
    let short_group = opts.group.clone().unwrap_or_else(|| DEFAULT_GROUP.into());
    let version = opts
        .version
        .clone()
        .unwrap_or_else(|| DEFAULT_VERSION.into());
    let kind = opts
        .kind
        .clone()
        .unwrap_or_else(|| names::upper_camel(&chart.name));
    names::check_subdomain("group", &short_group)?;
    names::check_version(&version)?;
    names::check_kind(&kind)?;
    let res = Resource {
        group: short_group.clone(),
        domain: project.domain.clone(),
        version: version.clone(),
        kind: kind.clone(),
    };
    let group = res.full_group();
    names::check_subdomain("group", &group)?;
    // One CRD per kind: bosun serves one version of a kind from one chart.
    if project
        .resources
        .iter()
        .any(|r| r.full_group() == group && r.kind == kind)
    {
        return Err(Error::Duplicate(format!("{kind}.{group}/{version}")));
    }
    if !project.multigroup {
        if let Some(other) = project.resources.iter().find(|r| r.full_group() != group) {
            return Err(Error::SecondGroup {
                existing: other.full_group(),
                wanted: group,
                short: other.group.clone(),
            });
        }
    }
    let chart_dir = format!("helm-charts/{}", chart.name);
    if dir.join(&chart_dir).exists() {
        return Err(Error::ChartExists(chart_dir));
    }

    let mut tree = Tree::default();
    for (rel, data) in &chart.files {
        tree.put(format!("{chart_dir}/{rel}"), data.clone());
    }
    let watches_path = dir.join("watches.yaml");
    let current = match std::fs::read_to_string(&watches_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => watches::initial(),
        Err(e) => return Err(Error::io(&watches_path)(e)),
    };
    let entry = watches::chart_entry(&group, &version, &kind, &chart_dir);
    tree.put("watches.yaml", watches::insert(&current, &entry)?);
    project.resources.push(res);
    tree.put("PROJECT", project.render());

    let kinds: Vec<KindRef> = project
        .resources
        .iter()
        .map(|r| KindRef {
            group: r.full_group(),
            short_group: r.group.clone(),
            version: r.version.clone(),
            kind: r.kind.clone(),
            plural: names::plural(&r.kind),
        })
        .collect();
    let new = kinds.last().ok_or(Error::NothingToCreate)?;
    let name = &project.project_name;
    tree.put(
        "config/rbac/kustomization.yaml",
        config::rbac_kustomization(&kinds),
    );
    tree.extend(config::kind_roles(name, new));
    let sample =
        config::sample(name, new, &chart.values).map_err(|e| Error::Derive(Box::new(e)))?;
    tree.put(
        format!("config/samples/{}", config::sample_name(new)),
        sample,
    );
    let samples: Vec<String> = kinds.iter().map(config::sample_name).collect();
    tree.put(
        "config/samples/kustomization.yaml",
        config::samples_kustomization(&samples),
    );
    uncomment(
        dir,
        &mut tree,
        "config/default/kustomization.yaml",
        "#- ../crd",
    )?;
    uncomment(
        dir,
        &mut tree,
        "config/manifests/kustomization.yaml",
        "#- ../samples",
    )?;

    let stage = Stage::new(dir)?;
    stage.copy_in("helm-charts")?;
    stage.write(&tree)?;
    let derived = derive
        .derive(
            Some(&stage.path().join("watches.yaml")),
            &config::namespace(name),
        )
        .map_err(Error::Derive)?;
    let extra = derived_files(&derived)?;
    stage.write(&extra)?;
    tree.extend(extra);
    stage.commit(&tree)?;
    Ok(vec![
        "Writing kustomize manifests for you to edit...".into(),
        "Writing scaffold for you to edit...".into(),
        format!("Created {chart_dir}"),
        "Generating RBAC rules".into(),
        format!(
            "Next: install the CRD and run the operator with:\n$ make install run\nthen create the sample:\n$ kubectl apply -f config/samples/{}",
            config::sample_name(new)
        ),
    ])
}

/// operator-sdk's `create api` turns on the kustomize lines of the first API.
fn uncomment(dir: &Path, tree: &mut Tree, rel: &str, line: &str) -> Result<(), Error> {
    let path = dir.join(rel);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let on = &line[1..];
    let edited: String = text
        .split_inclusive('\n')
        .map(|l| {
            if l.trim_end() == line {
                format!("{on}\n")
            } else {
                l.to_string()
            }
        })
        .collect();
    if edited != text {
        tree.put(rel, edited);
    }
    Ok(())
}

fn doc(v: &serde_json::Value) -> Result<String, Error> {
    let body = serde_yaml::to_string(v).map_err(|e| Error::Derive(Box::new(e)))?;
    Ok(format!("---\n{body}"))
}

/// `config/crd/bases/<group>_<plural>.yaml` per CRD, `config/crd/kustomization.yaml`, and the
/// operator's RBAC split over operator-sdk's file names.
pub fn derived_files(d: &Derived) -> Result<Tree, Error> {
    let mut t = Tree::default();
    let mut bases = Vec::new();
    for crd in &d.crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let file = format!("bases/{group}_{plural}.yaml");
        t.put(format!("config/crd/{file}"), doc(crd)?);
        bases.push(file);
    }
    if !bases.is_empty() {
        t.put(
            "config/crd/kustomization.yaml",
            config::crd_kustomization(&bases),
        );
    }
    for obj in &d.rbac {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let file = match kind {
            "ClusterRole" if name.ends_with("metrics-reader") => RBAC_FILES[2],
            "ClusterRole" => RBAC_FILES[0],
            "ClusterRoleBinding" => RBAC_FILES[1],
            "Role" => RBAC_FILES[3],
            "RoleBinding" => RBAC_FILES[4],
            _ => {
                return Err(Error::Derive(
                    format!("unexpected {kind} {name} among the RBAC objects").into(),
                ))
            }
        };
        if t.files.contains_key(file) {
            return Err(Error::Derive(
                format!("two RBAC objects for {file} ({kind} {name})").into(),
            ));
        }
        t.put(file, doc(obj)?);
    }
    Ok(t)
}
