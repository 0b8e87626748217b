//! A BookStore's data: its MongoDB volume claims. They carry no owner reference (data
//! outlives its owner) and are found by the instance label **and** the owner-UID label, never
//! by name alone. Claims an earlier BookStore of the same name left behind are reported, and
//! taken over only when the spec asks (`adoptClaims`); claims are deleted only when the spec
//! asks (`dataPolicy: Delete`).
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::error::{Error, Problem};
use crate::names::{Component, INSTANCE_LABEL, OWNER_UID_LABEL};
use crate::reason::Reason;
use crate::validate::{Identity, Plan};

/// Claims that belong to this BookStore: its instance label and its UID.
pub fn own_claims<'a>(
    id: &Identity,
    claims: impl Iterator<Item = &'a PersistentVolumeClaim>,
) -> Vec<&'a PersistentVolumeClaim> {
    claims
        .filter(|c| c.namespace().as_deref() == Some(id.namespace.as_str()))
        .filter(|c| {
            let l = c.labels();
            l.get(INSTANCE_LABEL) == Some(&id.names.instance)
                && l.get(OWNER_UID_LABEL) == Some(&id.uid)
        })
        .collect()
}

// Shared with the PostgresCluster operator: the runtime's.
pub use bosun_runtime::claims::{capacity, requested, resize_pending};

/// Before the StatefulSet is created or scaled up (its replicas were `from`): the claims it
/// would mount, found by their exact names — labelled or not, a claim's name is all a
/// StatefulSet goes by — must be this BookStore's. Claims an earlier BookStore of the same
/// name left behind, or made by anyone else, are never used silently: with
/// `bookDB.adoptClaims` they are relabelled to this BookStore on purpose, otherwise the
/// BookStore waits (a conflict). Costs one GET per new ordinal. Returns what was adopted.
pub async fn guard_names(client: &Client, plan: &Plan, from: i32) -> Result<Option<String>, Error> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.id.namespace);
    let names = &plan.id.names;
    let mut previous = Vec::new();
    let mut foreign = Vec::new();
    for ordinal in from.max(0)..plan.db.replicas {
        let name = names.claim(ordinal);
        let Some(c) = pvcs.get_opt(&name).await? else {
            continue;
        };
        let labels = c.labels();
        if labels.get(INSTANCE_LABEL) != Some(&names.instance) {
            foreign.push(name);
        } else if labels.get(OWNER_UID_LABEL) != Some(&plan.id.uid) {
            previous.push(name);
        }
    }
    if previous.is_empty() && foreign.is_empty() {
        return Ok(None);
    }
    if !plan.db.adopt_claims {
        let (reason, list, why) = if foreign.is_empty() {
            (
                Reason::ClaimsFromPreviousOwner,
                previous.join(", "),
                format!("hold data of an earlier BookStore named {}", names.instance),
            )
        } else {
            (
                Reason::ForeignClaims,
                foreign.iter().chain(&previous).cloned().collect::<Vec<_>>().join(", "),
                "have the names this BookStore's StatefulSet would mount but were not created for it".to_string(),
            )
        };
        return Err(Error::Conflict(Problem::new(
            reason,
            format!(
                "volume claims {list} {why}; they were left untouched. Set bookDB.adoptClaims: true to use that data, or delete the claims"
            ),
        )));
    }
    let mut labels = names.labels(Component::MongoDb);
    labels.insert(OWNER_UID_LABEL.to_string(), plan.id.uid.clone());
    let all: Vec<String> = previous.into_iter().chain(foreign).collect();
    for name in &all {
        let patch = json!({"metadata": {"labels": labels}});
        pvcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(Some(format!("adopted volume claims {}", all.join(", "))))
}

/// Deletes the claims of the BookStore `name` (UID `uid`) in `namespace`: only when its spec
/// asks for it.
pub async fn delete_all(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<usize, Error> {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let lp =
        ListParams::default().labels(&format!("{INSTANCE_LABEL}={name},{OWNER_UID_LABEL}={uid}"));
    let claims = pvcs.list(&lp).await?.items;
    for c in &claims {
        match pvcs.delete(&c.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(claims.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::{plan, sample};

    #[test]
    fn own_claims_need_label_and_uid() {
        let p = plan(&sample());
        let mk = |name: &str, uid: &str| {
            let mut c = PersistentVolumeClaim::default();
            c.metadata.name = Some(name.into());
            c.metadata.namespace = Some("shop".into());
            c.metadata.labels = Some(
                [
                    (INSTANCE_LABEL.to_string(), "bookstore-sample".to_string()),
                    (OWNER_UID_LABEL.to_string(), uid.to_string()),
                ]
                .into(),
            );
            c
        };
        let mine = mk(
            "data-bookstore-sample-mongodb-0",
            "0ef42889-deb4-11e9-ba56-42010a800256",
        );
        let old = mk("data-bookstore-sample-mongodb-1", "older-uid");
        let all = [mine, old];
        let own = own_claims(&p.id, all.iter());
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].name_any(), "data-bookstore-sample-mongodb-0");
    }
}
