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
use crate::names::{INSTANCE_LABEL, OWNER_UID_LABEL};
use crate::quantity;
use crate::reason::Reason;
use crate::validate::{Identity, Plan};

const PENDING: &str = "FileSystemResizePending";

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

/// The size a claim asks for.
pub fn requested(c: &PersistentVolumeClaim) -> Option<u128> {
    c.spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")
        .and_then(|q| quantity::to_bytes(&q.0))
}

/// The size a claim's volume has.
pub fn capacity(c: &PersistentVolumeClaim) -> Option<u128> {
    c.status
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .and_then(|q| quantity::to_bytes(&q.0))
}

/// The volume grew but its file system waits for the pod to restart.
pub fn resize_pending(c: &PersistentVolumeClaim) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == PENDING && c.status == "True"))
}

/// Before the StatefulSet is created: claims with its names that another BookStore (an
/// earlier one of the same name) left behind are not reused silently. With
/// `bookDB.adoptClaims` they are relabelled to this BookStore on purpose. `cached` are the
/// claims the operator watches, so the check costs no request. Returns what was adopted.
pub async fn guard_previous_owner(
    client: &Client,
    plan: &Plan,
    cached: &[&PersistentVolumeClaim],
) -> Result<Option<String>, Error> {
    let prefix = plan.id.names.claim_prefix();
    let foreign: Vec<&PersistentVolumeClaim> = cached
        .iter()
        .copied()
        .filter(|c| c.namespace().as_deref() == Some(plan.id.namespace.as_str()))
        .filter(|c| c.labels().get(INSTANCE_LABEL) == Some(&plan.id.names.instance))
        .filter(|c| c.name_any().starts_with(&prefix))
        .filter(|c| c.labels().get(OWNER_UID_LABEL) != Some(&plan.id.uid))
        .collect();
    if foreign.is_empty() {
        return Ok(None);
    }
    let list = foreign
        .iter()
        .map(|c| c.name_any())
        .collect::<Vec<_>>()
        .join(", ");
    if !plan.db.adopt_claims {
        return Err(Error::Conflict(Problem::new(
            Reason::ClaimsFromPreviousOwner,
            format!(
                "volume claims {list} hold data of an earlier BookStore named {}; they were left untouched. Set bookDB.adoptClaims: true to use that data, or delete the claims",
                plan.id.names.instance
            ),
        )));
    }
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &plan.id.namespace);
    for c in &foreign {
        let patch = json!({"metadata": {"labels": {OWNER_UID_LABEL: plan.id.uid}}});
        pvcs.patch(
            &c.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    Ok(Some(format!("adopted volume claims {list}")))
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
