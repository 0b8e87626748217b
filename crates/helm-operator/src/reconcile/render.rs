//! What was rendered: the chart rendered at a revision with the release's values, each
//! document turned into an object of a kind the API server serves, marked as the release's
//! ([`Plan`]). Nothing here writes to the cluster but the chart's own `crds/`, which a
//! template's object of such a kind needs served first (as Helm's install does).
use super::*;
/// One object of a render, with its kind as served.
pub(super) struct Item {
    pub(super) desired: Desired,
    pub(super) resolved: Resolved,
}

/// One render of the release.
pub(super) struct Plan {
    pub(super) revision: i64,
    pub(super) manifest: String,
    pub(super) items: Vec<Item>,
    pub(super) hooks: Vec<Hook>,
    pub(super) notes: String,
    pub(super) crds: Vec<(String, String)>,
    pub(super) digest: String,
    /// The functions it called whose output changes on every render.
    pub(super) nondeterministic: Vec<&'static str>,
    /// What applying it wrote.
    pub(super) written: Written,
}

/// Whether two manifests hold the same documents. Helm 3 and 4 lay a manifest out slightly
/// differently (a leading newline), and records written before bosun split as Helm does had
/// their last document trimmed: documents are compared without surrounding whitespace.
pub(super) fn same_documents(a: &str, b: &str) -> bool {
    let docs = |m: &str| -> Vec<String> {
        split_documents(m)
            .into_iter()
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .collect()
    };
    docs(a) == docs(b)
}

/// A digest of the values a release is rendered from.
pub(super) fn values_digest(vals: &Data) -> String {
    let mut h = Sha256::new();
    h.update(crate::crd::data_json(vals).to_string().as_bytes());
    hex::encode(&h.finalize()[..16])
}

/// The most one release's render may write (review L13). Its record holds the manifest in
/// one Secret (1 MiB, gzipped and base64-encoded), which a manifest this large cannot fit in
/// any realistic chart; the renderer's own bound (256 MiB, for `bosun render`) times the
/// reconciles in flight would be gigabytes of memory for a hostile spec.
pub const RELEASE_OUTPUT_LIMIT: usize = 32 << 20;

/// Renders the release at `revision` and turns it into objects.
pub(super) async fn render(
    host: &Ctx,
    owner: &ReleaseOwner,
    vals: &Data,
    revision: i64,
    upgrade: bool,
) -> Result<Plan, Error> {
    let mut opts = RenderOptions::new(&owner.release, &owner.namespace);
    opts.limits.max_output_bytes = RELEASE_OUTPUT_LIMIT;
    opts.revision = revision;
    opts.is_install = !upgrade;
    opts.is_upgrade = upgrade;
    opts.values = vals.clone();
    opts.kube_version = host.flavor.kube_version.clone();
    let view = host
        .flavor
        .cluster
        .get_or_init(|| crate::cluster::ClusterView::new(host.client.clone()));
    if let Some(snapshot) = view.snapshot().await {
        if opts.kube_version.is_none() {
            opts.kube_version = snapshot.kube_version.clone();
        }
        opts.cluster_api_versions = Some(snapshot.api_versions.clone());
    }
    if host.entry.dry_run_server {
        opts.lookup = Some(Arc::new(crate::cluster::ApiLookup::new(
            host.client.clone(),
            host.discovery.clone(),
            tokio::runtime::Handle::current(),
        )));
    }
    let chart = host.flavor.chart.clone();
    // As Helm's install and upgrade: a chart the cluster's version does not satisfy fails
    // with Helm's message, an invalid-spec error that waits for a change, not a retry.
    chart
        .check_kube_version(opts.kube_version.as_deref())
        .map_err(|e| Error::Render(e.to_string()))?;
    let rendered = tokio::task::block_in_place(|| chart.render(&opts))
        .map_err(|e| Error::Render(e.to_string()))?;
    let (generic, hook_manifests) =
        sort_manifests(&rendered).map_err(|e| Error::Render(e.to_string()))?;
    let mut manifest = String::new();
    let mut items = Vec::new();
    let mut crds_installed = false;
    for m in &generic {
        manifest.push_str(&format!("---\n# Source: {}\n{}\n", m.path, m.content));
        let it = match item(host, owner, m).await {
            // Helm installs crds/ before it builds the templates' objects: a template making
            // an object of the chart's own CRD needs that kind served first. Only on a miss,
            // so a chart whose CRDs exist costs no read per render.
            Err(Error::Manifest(_)) if !crds_installed && !rendered.crds.is_empty() => {
                crds_installed = true;
                crate::chart_crds::create_missing(&host.client, &rendered.crds).await?;
                served_item(host, owner, m).await?
            }
            r => r?,
        };
        items.push(it);
    }
    let runnable: Vec<Manifest> = hook_manifests
        .into_iter()
        .filter(|m| {
            m.hook
                .as_deref()
                .is_some_and(|h| h.split(',').any(|e| !e.trim().starts_with("test")))
        })
        .collect();
    let hooks = hooks::parse(&runnable)?;
    let notes = rendered.notes.clone().unwrap_or_default();
    let mut h = Sha256::new();
    h.update(manifest.as_bytes());
    for hk in &hooks {
        h.update(hk.manifest.content.as_bytes());
    }
    h.update(notes.as_bytes());
    // With `upgradeCRDs` a chart whose CRDs changed is a release to upgrade; without it the
    // digest is what it always was (an upgrade of bosun upgrades no release).
    if host.entry.upgrade_crds {
        for (path, content) in &rendered.crds {
            h.update(path.as_bytes());
            h.update(content.as_bytes());
        }
    }
    Ok(Plan {
        revision,
        manifest,
        items,
        hooks,
        notes,
        crds: rendered.crds.clone(),
        digest: hex::encode(&h.finalize()[..16]),
        nondeterministic: rendered.nondeterministic.clone(),
        written: Written::default(),
    })
}

/// [`item`] of a kind a CRD just created defines: the API server serves a new group a moment
/// after the CRD is Established, so a miss is asked again for a while (Helm likewise waits
/// for its CRDs, then resets its discovery) before it counts.
pub(super) async fn served_item(
    host: &Ctx,
    owner: &ReleaseOwner,
    m: &Manifest,
) -> Result<Item, Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match item(host, owner, m).await {
            Err(Error::Manifest(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            r => return r,
        }
    }
}

pub(super) async fn item(host: &Ctx, owner: &ReleaseOwner, m: &Manifest) -> Result<Item, Error> {
    let (gvk, mut object) = objects::parse(m).map_err(|e| Error::Manifest(e.to_string()))?;
    let resolved = host.discovery.resolve(&gvk).await.map_err(|e| {
        Error::Manifest(format!(
            "{}: kind {} is not served by the API server: {e}",
            m.path,
            gvk.api_version() + "/" + &gvk.kind
        ))
    })?;
    let keep = objects::mark(&mut object, resolved.namespaced, owner);
    objects::check_builtin(&gvk, &object).map_err(|e| {
        Error::Rejected(format!(
            "{}: {} {} cannot be sent: {e}",
            m.path,
            gvk.kind,
            object.metadata.name.as_deref().unwrap_or("")
        ))
    })?;
    Ok(Item {
        desired: Desired {
            path: m.path.clone(),
            gvk,
            object,
            keep,
        },
        resolved,
    })
}
