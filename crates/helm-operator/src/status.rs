//! The status a Helm-flavoured custom resource carries: operator-sdk's conditions and reasons
//! (so scripts written against helm-operator keep working) plus what it lacks — a `Ready`
//! condition (every rendered Deployment, StatefulSet, DaemonSet and Job rolled out and
//! ready), `observedGeneration`, and the revision.
//!
//! | type | status | reason | message |
//! |---|---|---|---|
//! | `Initialized` | True | | |
//! | `Deployed` | True/False | InstallSuccessful, UpgradeSuccessful, UninstallSuccessful | the chart's NOTES.txt |
//! | `ReleaseFailed` | True (removed when fine) | InstallError, UpgradeError, UninstallError, StoredVersionDropped (`upgradeCRDs`) | the error |
//! | `Irreconcilable` | True (removed when fine) | ReconcileError, ValuesFromError (`valuesFrom`) | the error |
//! | `Ready` (bosun) | True/False | AllReady, NotReady, ReleaseFailed | what is not ready |
//!
//! As in operator-sdk, `lastTransitionTime` moves only when a condition's status flips, and
//! `ReleaseFailed`/`Irreconcilable` are removed rather than set False. Unlike it, the status
//! does not copy the whole manifest (`deployedRelease.manifest`): `helm get manifest` has it,
//! and large charts' manifests do not fit in an object.
use serde::{Deserialize, Serialize};

use bosun_runtime::names;

names!(ConditionType {
    Initialized,
    Deployed,
    ReleaseFailed,
    Irreconcilable,
    Ready,
    Nondeterministic
});

names!(Reason {
    InstallSuccessful,
    UpgradeSuccessful,
    UninstallSuccessful,
    InstallError,
    UpgradeError,
    UninstallError,
    ReconcileError,
    AllReady,
    NotReady,
    NondeterministicRender,
    /// `upgradeCRDs` refused a chart CRD that drops a version still stored.
    StoredVersionDropped,
    /// A `valuesFrom` source is missing or holds no values.
    ValuesFromError
});

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The release bosun last deployed for the custom resource.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DeployedRelease {
    pub name: String,
    pub revision: i64,
    /// A digest of what the revision applied: an unchanged digest needs no release record
    /// read and no new revision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
    /// A digest of the values it was rendered from: a chart whose render differs every time
    /// (random values, `now`) is upgraded only when these change.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub values_digest: String,
}

/// One object of a release, as kept in the status with `--release-storage=none`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InventoryItem {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// `helm.sh/resource-policy: keep`: never deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct HelmStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed_release: Option<DeployedRelease>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<InventoryItem>,
    /// The digest of a render whose install or upgrade the API server refused as invalid:
    /// that same render is not tried again — not on the events its partial writes bring, not
    /// after a restart — until the spec, the overrides or the chart change it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_digest: Option<String>,
}

impl HelmStatus {
    /// The status an object carries (its JSON), or the empty status.
    pub fn of(data: &serde_json::Value) -> HelmStatus {
        data.get("status")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default()
    }

    pub fn condition(&self, t: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == t.as_str())
    }

    /// Sets a condition (keeping `lastTransitionTime` when the status did not flip).
    pub fn set(
        &mut self,
        previous: &HelmStatus,
        t: ConditionType,
        status: bool,
        reason: Option<Reason>,
        message: Option<String>,
        now: &str,
    ) {
        let status = if status { "True" } else { "False" }.to_string();
        let since = match previous.condition(t) {
            Some(c) if c.status == status => c.last_transition_time.clone(),
            _ => Some(now.to_string()),
        };
        let observed_generation = (t == ConditionType::Ready)
            .then_some(self.observed_generation)
            .flatten();
        let c = Condition {
            type_: t.as_str().to_string(),
            status,
            reason: reason.map(|r| r.as_str().to_string()),
            message: message.filter(|m| !m.is_empty()),
            last_transition_time: since,
            observed_generation,
        };
        match self.conditions.iter_mut().find(|x| x.type_ == c.type_) {
            Some(slot) => *slot = c,
            None => self.conditions.push(c),
        }
    }

    /// Removes a condition (operator-sdk removes `ReleaseFailed` and `Irreconcilable` when
    /// they no longer hold).
    pub fn remove(&mut self, t: ConditionType) {
        self.conditions.retain(|c| c.type_ != t.as_str());
    }

    pub fn is_true(&self, t: ConditionType) -> bool {
        self.condition(t).is_some_and(|c| c.status == "True")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_a_flip_and_failures_are_removed() {
        let before = HelmStatus::default();
        let mut s = HelmStatus {
            observed_generation: Some(2),
            ..Default::default()
        };
        s.set(
            &before,
            ConditionType::Ready,
            false,
            Some(Reason::NotReady),
            Some("0/1".into()),
            "t1",
        );
        s.set(
            &before,
            ConditionType::ReleaseFailed,
            true,
            Some(Reason::InstallError),
            Some("boom".into()),
            "t1",
        );
        let mut next = s.clone();
        next.set(
            &s,
            ConditionType::Ready,
            false,
            Some(Reason::NotReady),
            Some("1/2".into()),
            "t2",
        );
        assert_eq!(
            next.condition(ConditionType::Ready)
                .and_then(|c| c.last_transition_time.as_deref()),
            Some("t1")
        );
        assert_eq!(
            next.condition(ConditionType::Ready)
                .and_then(|c| c.observed_generation),
            Some(2)
        );
        next.set(
            &s,
            ConditionType::Ready,
            true,
            Some(Reason::AllReady),
            None,
            "t3",
        );
        assert_eq!(
            next.condition(ConditionType::Ready)
                .and_then(|c| c.last_transition_time.as_deref()),
            Some("t3")
        );
        next.remove(ConditionType::ReleaseFailed);
        assert!(next.condition(ConditionType::ReleaseFailed).is_none());
        let json = serde_json::to_value(&next).expect("json");
        assert_eq!(json["conditions"][0]["type"], "Ready");
        assert!(
            json["conditions"][0].get("message").is_none(),
            "empty messages are left out"
        );
    }
}
