//! A new revision, carried out and recorded: CRDs, pre hooks, objects, prune, post hooks,
//! then one release record with the outcome.
use super::*;
/// `records` is the release's history as read before deciding (empty without records) and
/// its deployed revision: reconciles of one custom resource never run at once, so it is still
/// the history, and the records written or deleted here keep it so — no LIST again.
pub(super) async fn install_or_upgrade(
    a: &Attempt<'_>,
    store: &dyn Records,
    plan: &Plan,
    records: (Vec<Release>, Option<&Release>),
    (old, upgrade): (&[Old], bool),
) -> Result<Written, Error> {
    let (host, owner, vals) = (a.host, &a.owner, &a.vals);
    let (mut history, deployed) = records;
    // Like helm-operator, a release with no deployed revision starts over: failed and
    // pending records of earlier attempts go, so retries never pile records up.
    if deployed.is_none() {
        for r in history
            .iter()
            .filter(|r| r.info.status != release::status::DEPLOYED)
        {
            store.delete(r).await?;
        }
        history.retain(|r| r.info.status == release::status::DEPLOYED);
    }
    // The record is written once, when the outcome is known (Helm writes a pending record
    // first, then updates it: a second write per revision that only another Helm client
    // racing this one would read; a crash in between leaves no record here, and the next
    // reconcile simply installs or upgrades again over its own objects).
    let mut rec = new_record(host, owner, vals, plan, deployed, upgrade);
    let result = run_release(host, owner, plan, old, upgrade, &mut rec).await;
    if result.is_err() {
        remove_added(host, owner, plan, old).await;
    }
    let s = store;
    match &result {
        Ok(_) => {
            rec.info.status = release::status::DEPLOYED.into();
            rec.info.description = if upgrade {
                "Upgrade complete"
            } else {
                "Install complete"
            }
            .into();
            s.create(&rec, Some(&owner.owner)).await?;
            if let Some(prev) = deployed {
                let mut prev = prev.clone();
                prev.info.status = release::status::SUPERSEDED.into();
                prev.info.description = "Superseded".into();
                s.update(&prev, Some(&owner.owner)).await?;
                if let Some(slot) = history.iter_mut().find(|r| r.version == prev.version) {
                    *slot = prev;
                }
            }
            history.push(rec);
            for r in beyond_history(&history, host.flavor.max_history) {
                s.delete(r).await?;
            }
        }
        Err(e) => {
            for r in beyond_history(&history, host.flavor.max_history.saturating_sub(1)) {
                s.delete(r).await?;
            }
            rec.info.status = release::status::FAILED.into();
            rec.info.description = format!(
                "{} \"{}\" failed: {e}",
                if upgrade { "Upgrade" } else { "Release" },
                owner.release
            );
            s.create(&rec, Some(&owner.owner)).await?;
        }
    }
    result
}

pub(super) fn new_record(
    host: &Ctx,
    owner: &ReleaseOwner,
    vals: &Data,
    plan: &Plan,
    deployed: Option<&Release>,
    upgrade: bool,
) -> Release {
    let t = now();
    let config = match crate::crd::data_json(vals) {
        serde_json::Value::Object(m) => m,
        _ => Default::default(),
    };
    Release {
        name: owner.release.clone(),
        info: release::Info {
            first_deployed: deployed
                .map(|d| d.info.first_deployed.clone())
                .unwrap_or_else(|| t.clone()),
            last_deployed: t,
            deleted: release::ZERO_TIME.into(),
            description: if upgrade {
                "Preparing upgrade"
            } else {
                "Initial install underway"
            }
            .into(),
            status: if upgrade {
                release::status::PENDING_UPGRADE
            } else {
                release::status::PENDING_INSTALL
            }
            .into(),
            notes: plan.notes.clone(),
            other: Default::default(),
        },
        chart: host.flavor.chart_record.clone(),
        config,
        manifest: plan.manifest.clone(),
        hooks: hooks::records(&plan.hooks),
        version: plan.revision,
        namespace: owner.namespace.clone(),
        other: Default::default(),
    }
}

pub(super) async fn run_release(
    host: &Ctx,
    owner: &ReleaseOwner,
    plan: &Plan,
    old: &[Old],
    upgrade: bool,
    rec: &mut Release,
) -> Result<Written, Error> {
    if host.entry.upgrade_crds {
        crate::chart_crds::apply(&host.client, &plan.crds).await?;
    } else {
        crate::chart_crds::create_missing(&host.client, &plan.crds).await?;
    }
    let runner = hooks::Runner {
        client: &host.client,
        discovery: &host.discovery,
        owner,
        timeout: hooks::TIMEOUT,
    };
    let (pre, post) = if upgrade {
        (Event::PreUpgrade, Event::PostUpgrade)
    } else {
        (Event::PreInstall, Event::PostInstall)
    };
    runner.run(&plan.hooks, pre, &mut rec.hooks).await?;
    let written = apply_all(host, owner, &plan.items).await?;
    prune(host, owner, plan, old).await?;
    runner.run(&plan.hooks, post, &mut rec.hooks).await?;
    Ok(written)
}
