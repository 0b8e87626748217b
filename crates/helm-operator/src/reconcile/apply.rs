//! What was applied: a plan's objects written in Helm's order where the cache shows drift,
//! the previous revision's leftovers pruned, a failed attempt's additions removed, and the
//! readiness of what is now in place.
use super::*;
pub(super) fn api_of(
    host: &Ctx,
    resolved: &Resolved,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    match (namespace, resolved.namespaced) {
        (Some(ns), true) => Api::namespaced_with(host.client.clone(), ns, &resolved.resource),
        _ => Api::all_with(host.client.clone(), &resolved.resource),
    }
}

/// How many objects of one kind are applied at once: Helm applies the objects of a kind all
/// at once (its `batchPerform`); a bound keeps a chart of thousands from opening as many
/// requests.
pub(super) const APPLY_BATCH: usize = 8;

/// Every object of a render, in Helm's order: kind after kind, as Helm's install waits for
/// each kind's objects before the next kind's, and the objects of one kind together (at most
/// [`APPLY_BATCH`] at once), as Helm sends them. A failure stops at the end of its kind.
/// Each is applied only where the cache shows it is not in place (Helm's ownership rules
/// let a record written by Helm's library — operator-sdk — vouch for the objects carrying its
/// release annotations).
pub(super) async fn apply_all(
    host: &Ctx,
    owner: &ReleaseOwner,
    items: &[Item],
) -> Result<Written, Error> {
    let mut wrote = Written::default();
    for batch in items.chunk_by(|a, b| a.desired.gvk == b.desired.gvk) {
        let applies: Vec<_> = batch.iter().map(|it| apply_one(host, owner, it)).collect();
        let results: Vec<Result<Option<bool>, Error>> = futures::stream::iter(applies)
            .buffered(APPLY_BATCH)
            .collect()
            .await;
        for (it, r) in batch.iter().zip(results) {
            if let Some(created) = r? {
                wrote.0.insert(key_of(&it.desired), created);
            }
        }
    }
    Ok(wrote)
}

/// One object applied where the cache shows it drifted (or absent); `Some(created)` when it
/// was written.
pub(super) async fn apply_one(
    host: &Ctx,
    owner: &ReleaseOwner,
    it: &Item,
) -> Result<Option<bool>, Error> {
    let mut wrote = None;
    let d = &it.desired;
    let api = api_of(host, &it.resolved, d.namespace());
    let ns = d.namespace().unwrap_or("");
    let cached = if host.children.covers(ns) {
        let cache = host.children.cache(&d.gvk).await?;
        cache.meta(ns, d.name())
    } else {
        // Outside the watched namespaces (review L2): read, or every reconcile would
        // rewrite it.
        api.get_metadata_opt(d.name())
            .await
            .map_err(|e| write_error(&d.describe(), e))?
            .map(|p| p.metadata)
    };
    if let Some(meta) = &cached {
        if let Some(msg) = objects::ownership_conflict(meta, owner, &d.describe()) {
            return Err(Error::Conflict(msg));
        }
    }
    let res = host
        .applier
        .apply_with(&api, &it.resolved.resource, &d.object, cached.as_ref())
        .await;
    if matches!(res, Ok(bosun_runtime::apply::Outcome::Applied)) {
        wrote = Some(cached.is_none());
        tracing::debug!(
            object = %d.describe(),
            cached_hash = ?cached.as_ref().and_then(|m| m.annotations.as_ref()).and_then(|a| a.get(bosun_runtime::apply::HASH_ANNOTATION)),
            cached_generation = ?cached.as_ref().and_then(|m| m.generation),
            desired_hash = ?bosun_runtime::apply::desired_hash(&d.object).ok(),
            "applied"
        );
    }
    match res {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 && cached.is_none() => {
            // An object of that name the cache cannot show (it lacks bosun's label): as
            // Helm does, write over it only when it belongs to this release — Helm's
            // release annotations (a release being taken over from operator-sdk) or this
            // custom resource as its controller.
            let live = api
                .get_metadata_opt(d.name())
                .await
                .map_err(|e| write_error(&d.describe(), e))?;
            if let Some(live) = &live {
                if let Some(msg) = objects::ownership_conflict(&live.metadata, owner, &d.describe())
                {
                    return Err(Error::Conflict(msg));
                }
            }
            host.applier
                .adopt_with(&api, &it.resolved.resource, &d.object)
                .await
                .map_err(|e| write_error(&d.describe(), e))?;
            wrote = Some(false);
        }
        Err(kube::Error::Api(s)) if s.code == 422 && cached.is_some() && owner.force => {
            // upgrade-force: an immutable field changed; replace the object.
            tracing::info!(object = %d.describe(), "upgrade-force: recreating after {}", s.message);
            delete_object(&api, d.name()).await?;
            host.applier
                .apply_with(&api, &it.resolved.resource, &d.object, None)
                .await
                .map_err(|e| write_error(&d.describe(), e))?;
        }
        Err(e) => return Err(write_error(&d.describe(), e)),
    }
    Ok(wrote)
}

/// The objects a reconcile wrote, and whether it created them: their cached status is stale
/// until their watch event.
#[derive(Debug, Default)]
pub(super) struct Written(pub(super) BTreeMap<(String, String, Option<String>, String), bool>);

pub(super) async fn delete_object(api: &Api<DynamicObject>, name: &str) -> Result<(), Error> {
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// An object of the previous revision.
pub(super) struct Old {
    pub(super) gvk: GroupVersionKind,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) keep: bool,
}

impl Old {
    pub(super) fn from_inventory(i: &InventoryItem) -> Old {
        Old {
            gvk: objects::gvk_of(&i.api_version, &i.kind),
            namespace: i.namespace.clone(),
            name: i.name.clone(),
            keep: i.keep,
        }
    }

    pub(super) fn key(&self) -> (String, String, Option<String>, String) {
        (
            self.gvk.group.clone(),
            self.gvk.kind.clone(),
            self.namespace.clone(),
            self.name.clone(),
        )
    }
}

pub(super) fn key_of(d: &Desired) -> (String, String, Option<String>, String) {
    (
        d.gvk.group.clone(),
        d.gvk.kind.clone(),
        d.namespace().map(str::to_string),
        d.name().to_string(),
    )
}

/// The objects of a recorded manifest; documents that no longer parse or whose kind is no
/// longer served are left alone.
pub(super) async fn old_objects(host: &Ctx, owner: &ReleaseOwner, manifest: &str) -> Vec<Old> {
    let mut out = Vec::new();
    for doc in split_documents(manifest) {
        let m = Manifest {
            path: String::new(),
            content: doc,
            api_version: String::new(),
            kind: String::new(),
            name: String::new(),
            hook: None,
        };
        let Ok(it) = item(host, owner, &m).await else {
            continue;
        };
        out.push(Old {
            namespace: it.desired.namespace().map(str::to_string),
            name: it.desired.name().to_string(),
            keep: it.desired.keep,
            gvk: it.desired.gvk,
        });
    }
    out
}

/// After a failed install or upgrade, deletes what the attempt added to the last deployed
/// revision (all of it for an install) — what helm-operator's uninstall of a failed install
/// and rollback of a failed upgrade remove — so no object of a failed revision is left that
/// no record tracks (a revert to the deployed spec only syncs; a retry recreates them). The
/// objects both revisions render keep the attempt's values until the next success; objects
/// kept by policy or owned by someone else stay. Failures here are logged: the attempt's own
/// error is the one reported.
pub(super) async fn remove_added(host: &Ctx, owner: &ReleaseOwner, plan: &Plan, old: &[Old]) {
    let before: BTreeSet<_> = old.iter().map(Old::key).collect();
    for it in plan
        .items
        .iter()
        .filter(|i| !i.desired.keep && !before.contains(&key_of(&i.desired)))
    {
        let d = &it.desired;
        let api = api_of(host, &it.resolved, d.namespace());
        let removed = match api.get_metadata_opt(d.name()).await {
            Ok(Some(live))
                if objects::ownership_conflict(&live.metadata, owner, d.name()).is_none() =>
            {
                delete_object(&api, d.name()).await
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e.into()),
        };
        if let Err(e) = removed {
            tracing::warn!(release = %owner.release, object = %d.describe(), error = %e, "could not remove an object of the failed revision");
        }
    }
}

/// Deletes the objects of the previous revision the new one no longer renders (never those
/// kept by policy, never objects the release does not own).
pub(super) async fn prune(
    host: &Ctx,
    owner: &ReleaseOwner,
    plan: &Plan,
    old: &[Old],
) -> Result<(), Error> {
    let now: BTreeSet<_> = plan.items.iter().map(|i| key_of(&i.desired)).collect();
    for o in old.iter().filter(|o| !o.keep && !now.contains(&o.key())) {
        let Ok(resolved) = host.discovery.resolve(&o.gvk).await else {
            continue;
        };
        let cache = host.children.cache(&o.gvk).await?;
        let Some(meta) = cache.meta(o.namespace.as_deref().unwrap_or(""), &o.name) else {
            continue;
        };
        if objects::ownership_conflict(&meta, owner, &o.name).is_some() {
            continue;
        }
        let api = api_of(host, &resolved, o.namespace.as_deref());
        delete_object(&api, &o.name).await?;
    }
    Ok(())
}

/// Step 6: None when every rendered workload is rolled out and ready.
pub(super) async fn readiness(
    host: &Ctx,
    items: &[Item],
    written: &Written,
) -> Result<Option<String>, Error> {
    let mut waiting = Vec::new();
    for it in items.iter().filter(|i| ready::is_tracked(&i.desired.gvk)) {
        let d = &it.desired;
        let ns = d.namespace().unwrap_or("");
        if !host.children.covers(ns) {
            // No cache and no event for it (review L2): read it; a resync looks again.
            let api = api_of(host, &it.resolved, d.namespace());
            match api.get_opt(d.name()).await? {
                Some(obj) => {
                    if let Some(why) = ready::not_ready(&d.gvk, &obj) {
                        waiting.push(why);
                    }
                }
                None => waiting.push(format!("{} not created yet", d.describe())),
            }
            continue;
        }
        match written.0.get(&key_of(d)) {
            Some(true) => {
                // Just created: it is at generation 1 with an empty status (a create ignores
                // the status), which is all its readiness can say — the same as its cached
                // copy will say until its controller acts, so the reconcile its watch event
                // brings writes no status again (one status write per install, not two).
                if let Some(why) = ready::not_ready(&d.gvk, &ready::created(&d.object)) {
                    waiting.push(why);
                }
                continue;
            }
            Some(false) => {
                // Applied over: the cache still shows the old object; its event brings the
                // next reconcile, which sees the new one.
                waiting.push(format!(
                    "{} was updated; waiting for its controller",
                    d.describe()
                ));
                continue;
            }
            None => {}
        }
        let cache = host.children.cache(&d.gvk).await?;
        match cache.get(ns, d.name()) {
            Some(obj) => {
                if let Some(why) = ready::not_ready(&d.gvk, &obj) {
                    waiting.push(why);
                }
            }
            None => waiting.push(format!("{} not created yet", d.describe())),
        }
    }
    Ok((!waiting.is_empty()).then(|| waiting.join("; ")))
}
