//! The install-or-upgrade decision, pure: from what the custom resource's status says was
//! deployed (or refused) and the digest of what the chart renders now, one step; from what
//! the release records hold, the next revision. The reconcile carries the step out
//! ([`super::converge`]); deletion (uninstall) is decided before any render, by the deletion
//! timestamp alone ([`super::reconcile`]).
use crate::status::{ConditionType as C, HelmStatus};
use crate::storage::Storage;

/// What to do with a render before any release record is read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// What is deployed is what the spec asks for: keep it in place (no record read).
    Sync { revision: i64 },
    /// The same render the API server refused as invalid last time: say so again, write
    /// nothing. (Retrying would only add a failed record per event — the attempt's own
    /// partial writes bring one — and, with `.Release.Revision` in a template, never stop.)
    RefuseAgain { message: String },
    /// A release to install or upgrade (the records say which).
    Release,
}

/// The step for a render of digest `digest`, given the status before this reconcile.
pub(super) fn step(previous: &HelmStatus, digest: &str) -> Step {
    if let Some(d) = previous
        .deployed_release
        .as_ref()
        .filter(|d| d.digest == digest)
    {
        return Step::Sync {
            revision: d.revision,
        };
    }
    if previous.failed_digest.as_deref() == Some(digest) {
        if let Some(c) = previous
            .condition(C::ReleaseFailed)
            .or(previous.condition(C::Irreconcilable))
        {
            return Step::RefuseAgain {
                message: c.message.clone().unwrap_or_default(),
            };
        }
    }
    Step::Release
}

/// The revision a release attempt records, and whether it is an upgrade.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Next {
    pub(super) revision: i64,
    pub(super) upgrade: bool,
}

/// `recorded`: the highest revision in the records when one of them is deployed; `deployed`:
/// the revision the status says is deployed. With records, a release with a deployed
/// revision goes on from the latest and one without starts over at 1 (its failed attempts are
/// cleared); without records the status counts. Either saying something is deployed makes it
/// an upgrade.
pub(super) fn next(storage: Storage, recorded: Option<i64>, deployed: Option<i64>) -> Next {
    let base = match (recorded, storage) {
        (Some(latest), _) => latest,
        (None, Storage::Secrets | Storage::ConfigMaps) => 0,
        (None, Storage::None) => deployed.unwrap_or(0),
    };
    Next {
        revision: base + 1,
        upgrade: recorded.is_some() || deployed.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{DeployedRelease, Reason as R};

    fn deployed(revision: i64, digest: &str) -> HelmStatus {
        HelmStatus {
            deployed_release: Some(DeployedRelease {
                name: "r".into(),
                revision,
                digest: digest.into(),
                values_digest: String::new(),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_deployed_render_syncs_a_refused_one_is_not_tried_again_anything_else_releases() {
        assert_eq!(step(&HelmStatus::default(), "a"), Step::Release, "new");
        assert_eq!(
            step(&deployed(3, "a"), "a"),
            Step::Sync { revision: 3 },
            "unchanged"
        );
        assert_eq!(step(&deployed(3, "a"), "b"), Step::Release, "changed");
        let mut refused = deployed(3, "a");
        refused.failed_digest = Some("b".into());
        refused.set(
            &HelmStatus::default(),
            C::ReleaseFailed,
            true,
            Some(R::UpgradeError),
            Some("invalid".into()),
            "t",
        );
        assert_eq!(
            step(&refused, "b"),
            Step::RefuseAgain {
                message: "invalid".into()
            },
            "the same refused render"
        );
        assert_eq!(step(&refused, "c"), Step::Release, "a new render is tried");
        assert_eq!(
            step(&refused, "a"),
            Step::Sync { revision: 3 },
            "a revert to what is deployed syncs"
        );
        let mut cleared = refused.clone();
        cleared.remove(C::ReleaseFailed);
        assert_eq!(
            step(&cleared, "b"),
            Step::Release,
            "a digest without its failure condition is no refusal"
        );
    }

    #[test]
    fn revisions_go_on_from_the_records_or_the_status() {
        type Case = (Storage, Option<i64>, Option<i64>, i64, bool, &'static str);
        let cases: &[Case] = &[
            (Storage::Secrets, None, None, 1, false, "a first install"),
            (
                Storage::ConfigMaps,
                Some(2),
                Some(2),
                3,
                true,
                "ConfigMaps as Secrets",
            ),
            (
                Storage::Secrets,
                Some(4),
                Some(3),
                5,
                true,
                "after the latest record",
            ),
            (
                Storage::Secrets,
                None,
                Some(3),
                1,
                true,
                "records lost: starts over, still an upgrade of what runs",
            ),
            (Storage::None, None, Some(3), 4, true, "the status counts"),
            (Storage::None, None, None, 1, false, "a first install"),
        ];
        for (storage, recorded, deployed, revision, upgrade, why) in cases {
            assert_eq!(
                next(*storage, *recorded, *deployed),
                Next {
                    revision: *revision,
                    upgrade: *upgrade
                },
                "{why}"
            );
        }
    }
}
