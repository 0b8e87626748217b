//! The BookStore's status, computed (purely) from what the caches show.
use bosun_runtime::conditions::{condition, set_condition};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::jiff::Timestamp;

use crate::api::BookStoreStatus;
use crate::claims::capacity;
use crate::error::Problem;
use crate::names::{selector_string, Component};
use crate::quantity;
use crate::reason::{ConditionType, Reason};
use crate::validate::{Identity, Plan};

/// What the reconcile achieved, for the conditions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Applied,
    /// Volume expansion under way; the message says which step.
    Resizing(String),
    /// Something the user must fix or decide (Degraded).
    Problem(Problem),
}

#[derive(Default)]
pub struct Observed<'a> {
    pub deployment: Option<&'a Deployment>,
    pub statefulset: Option<&'a StatefulSet>,
    pub claims: Vec<&'a PersistentVolumeClaim>,
}

/// The replicas the spec asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub app: i32,
    pub db: i32,
}

impl Wanted {
    pub fn of(plan: &Plan) -> Wanted {
        Wanted {
            app: plan.app.replicas,
            db: plan.db.replicas,
        }
    }
}

/// The status of the BookStore `id`; `previous` is the status it carries.
pub fn compute(
    id: &Identity,
    want: Wanted,
    previous: Option<&BookStoreStatus>,
    observed: &Observed,
    outcome: &Outcome,
    now: Timestamp,
) -> BookStoreStatus {
    let gen = id.generation;
    let app_want = want.app;
    let db_want = want.db;
    let dep_status = observed.deployment.and_then(|d| d.status.as_ref());
    let app_ready = dep_status.and_then(|s| s.ready_replicas).unwrap_or(0);
    let app_updated = dep_status.and_then(|s| s.updated_replicas).unwrap_or(0);
    let app_replicas = dep_status.and_then(|s| s.replicas).unwrap_or(0);
    let dep_current = observed.deployment.is_some_and(|d| {
        d.status.as_ref().and_then(|s| s.observed_generation) >= d.metadata.generation
    });
    let sts_status = observed.statefulset.and_then(|s| s.status.as_ref());
    let db_ready = sts_status.and_then(|s| s.ready_replicas).unwrap_or(0);
    let db_updated = sts_status.and_then(|s| s.updated_replicas).unwrap_or(0);
    let sts_current = observed.statefulset.is_some_and(|s| {
        s.status.as_ref().and_then(|st| st.observed_generation) >= s.metadata.generation
    });
    let volume_size = observed
        .claims
        .iter()
        .filter_map(|c| capacity(c))
        .min()
        .map(quantity::human);

    let previous = previous
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let mut conditions = Vec::new();
    // Rolled out: every pod ready and of the current template, no old pod left over.
    let app_done =
        dep_current && app_ready >= app_want && app_updated >= app_want && app_replicas == app_want;
    let db_done = sts_current && db_ready >= db_want && db_updated >= db_want;
    let replicas_ready = app_done && db_done;
    let counts = format!("app {app_ready}/{app_want} ready, MongoDB {db_ready}/{db_want} ready");
    let ready = match outcome {
        Outcome::Problem(p) => (false, p.reason, p.message.clone()),
        Outcome::Resizing(m) => (false, Reason::Resizing, m.clone()),
        Outcome::Applied if replicas_ready => (true, Reason::AllReplicasReady, counts.clone()),
        Outcome::Applied => (false, Reason::ReplicasNotReady, counts.clone()),
    };
    let progressing = match outcome {
        Outcome::Resizing(m) => (true, Reason::Resizing, m.clone()),
        _ if !replicas_ready => (true, Reason::RollingOut, counts.clone()),
        _ => (false, Reason::Stable, counts.clone()),
    };
    let degraded = match outcome {
        Outcome::Problem(p) => (true, p.reason, p.message.clone()),
        _ => (false, Reason::AsExpected, "no problem found".to_string()),
    };
    for (type_, (status, reason, message)) in [
        (ConditionType::Ready, ready),
        (ConditionType::Progressing, progressing),
        (ConditionType::Degraded, degraded),
    ] {
        set_condition(
            &mut conditions,
            previous,
            condition(type_.as_str(), status, reason.as_str(), message, gen),
            now,
        );
    }

    BookStoreStatus {
        observed_generation: gen,
        conditions,
        app_replicas,
        app_ready_replicas: app_ready,
        app_selector: selector_string(&id.names.selector(Component::App)),
        db_ready_replicas: db_ready,
        app: format!("{app_ready}/{app_want}"),
        db: format!("{db_ready}/{db_want}"),
        volume_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::{plan, sample};
    use bosun_runtime::conditions::{find, is_true};
    use k8s_openapi::api::apps::v1::{DeploymentStatus, StatefulSetStatus};

    fn dep(ready: i32, gen: i64, observed: i64) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.generation = Some(gen);
        d.status = Some(DeploymentStatus {
            ready_replicas: Some(ready),
            updated_replicas: Some(ready),
            replicas: Some(ready),
            observed_generation: Some(observed),
            ..Default::default()
        });
        d
    }

    fn sts(ready: i32) -> StatefulSet {
        let status = StatefulSetStatus {
            ready_replicas: Some(ready),
            updated_replicas: Some(ready),
            observed_generation: Some(1),
            ..Default::default()
        };
        let mut s = StatefulSet {
            status: Some(status),
            ..Default::default()
        };
        s.metadata.generation = Some(1);
        s
    }

    #[test]
    fn ready_when_every_replica_is() {
        let mut bs = sample();
        bs.metadata.generation = Some(3);
        let (d, s) = (dep(1, 1, 1), sts(1));
        let obs = Observed {
            deployment: Some(&d),
            statefulset: Some(&s),
            claims: vec![],
        };
        let st = compute(
            &plan(&bs).id,
            Wanted::of(&plan(&bs)),
            None,
            &obs,
            &Outcome::Applied,
            Timestamp::UNIX_EPOCH,
        );
        assert!(is_true(&st.conditions, "Ready"));
        assert!(!is_true(&st.conditions, "Progressing"));
        assert!(!is_true(&st.conditions, "Degraded"));
        assert_eq!(st.observed_generation, Some(3));
        assert_eq!((st.app.as_str(), st.db.as_str()), ("1/1", "1/1"));
        assert_eq!(st.app_selector, "app.kubernetes.io/component=app,app.kubernetes.io/instance=bookstore-sample,app.kubernetes.io/name=bookstore");
    }

    #[test]
    fn an_unobserved_deployment_generation_is_progressing() {
        let bs = sample();
        let (d, s) = (dep(1, 2, 1), sts(1));
        let obs = Observed {
            deployment: Some(&d),
            statefulset: Some(&s),
            claims: vec![],
        };
        let st = compute(
            &plan(&bs).id,
            Wanted::of(&plan(&bs)),
            None,
            &obs,
            &Outcome::Applied,
            Timestamp::UNIX_EPOCH,
        );
        assert!(!is_true(&st.conditions, "Ready"));
        assert!(is_true(&st.conditions, "Progressing"));
    }

    #[test]
    fn surge_pods_of_a_rollout_are_not_ready() {
        let bs = sample();
        let mut d = dep(2, 2, 2); // one new ready pod plus one old: replicas 2 of 1 wanted
        if let Some(s) = d.status.as_mut() {
            s.updated_replicas = Some(1);
        }
        let s = sts(1);
        let obs = Observed {
            deployment: Some(&d),
            statefulset: Some(&s),
            claims: vec![],
        };
        let st = compute(
            &plan(&bs).id,
            Wanted::of(&plan(&bs)),
            None,
            &obs,
            &Outcome::Applied,
            Timestamp::UNIX_EPOCH,
        );
        assert!(!is_true(&st.conditions, "Ready"));
        assert!(is_true(&st.conditions, "Progressing"));
    }

    #[test]
    fn problems_are_degraded_with_their_reason() {
        let bs = sample();
        let p = Problem::new(Reason::ShrinkRefused, "dbSize 1Gi is below the current 2Gi");
        let st = compute(
            &plan(&bs).id,
            Wanted::of(&plan(&bs)),
            None,
            &Observed::default(),
            &Outcome::Problem(p),
            Timestamp::UNIX_EPOCH,
        );
        let d = find(&st.conditions, "Degraded").expect("degraded");
        assert_eq!(
            (d.status.as_str(), d.reason.as_str()),
            ("True", "ShrinkRefused")
        );
        assert_eq!(
            find(&st.conditions, "Ready").map(|c| c.reason.as_str()),
            Some("ShrinkRefused")
        );
    }
}
