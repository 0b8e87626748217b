//! Server-side apply with one stable field manager, and no request at all when the desired
//! object is already what the cluster holds.
//!
//! **Deciding without a request.** Children are cached slimmed (no specs), so the decision
//! rests on what a fingerprinting cache keeps instead of `managedFields`: the fingerprint of
//! the live values at the fields this field manager owns ([`crate::owned`]). They equal the
//! desired object's fingerprint exactly when nobody has touched what bosun wrote — an edit
//! made while bosun was stopped, a label or owner reference removed, a same-name object
//! recreated from a copy all show — so a restart over converged objects sends nothing and
//! every drift is caught on first sight. After each write the applier remembers, per object
//! **UID**, the fingerprint its write produced, which covers values the API server rewrites
//! (a quantity in another spelling) from then on.
//!
//! Caches that keep no fingerprint (metadata-only watches) fall back to the
//! `bosun.dev/applied-hash` annotation and the `generation` (or `resourceVersion`) the
//! applier's own write returned, per UID: drift made while the applier runs is caught, but a
//! matching hash is trusted on first sight.
//!
//! **Creating.** An object the (synced) cache does not hold is created, never applied over:
//! a name taken by an object the cache cannot show (filtered out by its label selector, or
//! created a moment ago) fails with 409 AlreadyExists. The create is itself a server-side
//! apply carrying a `resourceVersion` no object can have: the API server ignores it when the
//! object is absent and refuses the apply when it exists. (Kinds whose storage refuses that —
//! Services on v1.20 — are looked up by name first.) A plain create (POST) would be atomic
//! too but records an `Update` entry, which owns the server's defaults (so the fingerprint
//! above would never match after a restart) and which a later apply never prunes (so a field
//! dropped from the desired object would stay forever).
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams};
use kube::core::Status;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::owned::{self, Fingerprint};

pub const HASH_ANNOTATION: &str = "bosun.dev/applied-hash";

/// What this applier last wrote to (or found in place on) one object, by UID; 48 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Applied {
    /// The desired object's hash (the annotation's hex, as bits).
    hash: u128,
    /// The live fingerprint of the written object (0: none known).
    fingerprint: Fingerprint,
    /// Its generation (or a digest of its resourceVersion), for caches without fingerprints.
    marker: u64,
}

/// What [`Applier::apply`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing was written: the cache showed the desired state in place (no request was
    /// sent), or, where the cache did not show the object yet (it lags behind this applier's
    /// own creation, or behind the relabel of a moved child), the create was refused and the
    /// live object, read once, held exactly this applier's desired state.
    Unchanged,
    /// The object was written (created, or server-side applied).
    Applied,
}

#[derive(Clone)]
pub struct Applier {
    field_manager: String,
    memo: Arc<Mutex<HashMap<u128, Applied>>>,
    /// Kinds whose storage refuses the guarded create (see [`Applier::create`]).
    refuse_guarded_create: Arc<Mutex<std::collections::HashSet<String>>>,
}

/// Adds `labels` to `meta`'s, over any of the same key the desired object set.
fn add_labels(meta: &mut ObjectMeta, labels: std::collections::BTreeMap<String, String>) {
    if !labels.is_empty() {
        meta.labels
            .get_or_insert_with(Default::default)
            .extend(labels);
    }
}

/// The hash of a desired object, as stored in [`HASH_ANNOTATION`]. A shard label
/// (`shard.bosun.dev/…`) counts by its presence, not its value: a move relabels a child with
/// its owner's new member without the applier's write, and the annotation must still match
/// what the new member would send; a child that lacks the label (created unsharded) still
/// differs. An object without one hashes as it always did.
pub fn desired_hash<K: Resource + Serialize + Clone>(obj: &K) -> Result<String, serde_json::Error> {
    let sharded = obj
        .meta()
        .labels
        .iter()
        .flatten()
        .any(|(k, _)| k.starts_with(crate::shard::SHARD_LABEL));
    let bytes = if sharded {
        let mut neutral = obj.clone();
        for (k, v) in neutral.meta_mut().labels.iter_mut().flatten() {
            if k.starts_with(crate::shard::SHARD_LABEL) {
                v.clear();
            }
        }
        serde_json::to_vec(&neutral)?
    } else {
        serde_json::to_vec(obj)?
    };
    Ok(hex::encode(&Sha256::digest(&bytes)[..12]))
}

fn marker(meta: &ObjectMeta) -> u64 {
    use std::hash::{Hash, Hasher};
    match meta.generation {
        Some(g) if g > 0 => g.unsigned_abs(),
        _ => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            meta.resource_version.hash(&mut h);
            h.finish() | (1 << 63)
        }
    }
}

/// The memo key of an object: its UID (a recreated object is another object).
fn uid_key(meta: &ObjectMeta) -> u128 {
    match &meta.uid {
        Some(u) => owned::uid_bits(u),
        None => owned::uid_bits(&format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or("")
        )),
    }
}

/// Whether `live` carries every shard label `desired` does, with its value.
fn labelled(live: &ObjectMeta, desired: &ObjectMeta) -> bool {
    desired
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(crate::shard::SHARD_LABEL))
        .all(|(k, v)| live.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
}

/// The bits of a [`desired_hash`] (24 hex digits).
fn hash_bits(hash: &str) -> u128 {
    u128::from_str_radix(hash, 16).unwrap_or_else(|_| owned::uid_bits(hash))
}

/// What to do with one desired object.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    InPlace,
    Create,
    Apply,
}

/// A `resourceVersion` no object can have (etcd revisions never get there): as a
/// precondition it makes an apply create-only.
const NO_OBJECT_HAS: &str = "18446744073709551615";

impl Applier {
    pub fn new(field_manager: impl Into<String>) -> Self {
        Applier {
            field_manager: field_manager.into(),
            memo: Arc::default(),
            refuse_guarded_create: Arc::default(),
        }
    }

    pub fn field_manager(&self) -> &str {
        &self.field_manager
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, HashMap<u128, Applied>> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Decides from cached metadata whether `hash` / `want` (the desired object's hash and
    /// fingerprint) need a write.
    fn decide(&self, hash: &str, want: Fingerprint, cached: Option<&ObjectMeta>) -> Decision {
        let Some(cached) = cached else {
            return Decision::Create;
        };
        let key = uid_key(cached);
        if cached.deletion_timestamp.is_some() {
            return Decision::Apply;
        }
        let hash_bits = hash_bits(hash);
        if let Some(owned) = owned::summary(cached, &self.field_manager) {
            let live = owned.fingerprint;
            let remembered = self
                .memo()
                .get(&key)
                .is_some_and(|m| m.hash == hash_bits && live.is_some_and(|l| l == m.fingerprint));
            if live == Some(want) || remembered {
                return Decision::InPlace;
            }
            return Decision::Apply;
        }
        // A cache without fingerprints: the hash annotation and the marker.
        let annotated = cached
            .annotations
            .as_ref()
            .and_then(|a| a.get(HASH_ANNOTATION))
            .map(String::as_str)
            == Some(hash);
        if !annotated {
            return Decision::Apply;
        }
        let mut memo = self.memo();
        match memo.get(&key) {
            Some(prev) if prev.hash == hash_bits => {
                if prev.marker == marker(cached) {
                    Decision::InPlace
                } else {
                    Decision::Apply
                }
            }
            _ => {
                // Nothing remembered (a restart, or another replica applied it): the hash says
                // the object was applied with this desired state; take its marker as the baseline.
                memo.insert(
                    key,
                    Applied {
                        hash: hash_bits,
                        fingerprint: 0,
                        marker: marker(cached),
                    },
                );
                Decision::InPlace
            }
        }
    }

    /// Applies `desired` (of a k8s-openapi kind) unless `cached` (the object's metadata from
    /// a synced watch cache) shows it is already in place. `cached: None` means the cache
    /// holds no such object: it is then created (never applied over), which fails with 409
    /// (AlreadyExists) if an object of that name exists after all — one the cache cannot
    /// show (filtered out by its label selector, or created a moment ago) is never taken over.
    pub async fn apply<K>(
        &self,
        api: &Api<K>,
        desired: &K,
        cached: Option<&ObjectMeta>,
    ) -> Result<Outcome, kube::Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
    {
        self.apply_with(api, &(), desired, cached).await
    }

    /// [`Applier::apply`] for any kind: `dyntype` says its apiVersion and kind (an
    /// `ApiResource` for a `DynamicObject`).
    pub async fn apply_with<K>(
        &self,
        api: &Api<K>,
        dyntype: &K::DynamicType,
        desired: &K,
        cached: Option<&ObjectMeta>,
    ) -> Result<Outcome, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        self.write_with(api, dyntype, desired, cached, false).await
    }

    /// Server-side applies `desired` over the object of that name the cache does not show,
    /// taking over the fields it sets. Only for an object the caller has read and judged its
    /// own: [`Applier::apply_with`] refuses (409) to write over an object its cache cannot
    /// show, and this is the way past that refusal once the live object proves ownership (as
    /// Helm's release annotations vouch for the objects of a release being taken over).
    pub async fn adopt_with<K>(
        &self,
        api: &Api<K>,
        dyntype: &K::DynamicType,
        desired: &K,
    ) -> Result<Outcome, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        self.write_with(api, dyntype, desired, None, true).await
    }

    async fn write_with<K>(
        &self,
        api: &Api<K>,
        dyntype: &K::DynamicType,
        desired: &K,
        cached: Option<&ObjectMeta>,
        adopt: bool,
    ) -> Result<Outcome, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        let mut obj = desired.clone();
        // Sharded, a child carries its owner's shard label in every write, the create
        // included: its member's cache (which selects that label) holds it from the start,
        // and a server-side apply that left the label out would remove it.
        add_labels(obj.meta_mut(), crate::shard::labels_in_scope());
        let hash = desired_hash(&obj).map_err(kube::Error::SerdeError)?;
        obj.annotations_mut()
            .insert(HASH_ANNOTATION.to_string(), hash.clone());
        let mut value = serde_json::to_value(&obj).map_err(kube::Error::SerdeError)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), K::api_version(dyntype).into());
            map.insert("kind".into(), K::kind(dyntype).into());
        }
        let want = owned::desired(&value);
        let decision = if adopt {
            Decision::Apply
        } else {
            self.decide(&hash, want, cached)
        };
        let written = match decision {
            Decision::InPlace => {
                if let Some(c) = cached {
                    self.remember(c, &hash, owned::summary(c, &self.field_manager));
                }
                return Ok(Outcome::Unchanged);
            }
            Decision::Create => {
                let kind = format!("{}/{}", K::api_version(dyntype), K::kind(dyntype));
                match self.create(api, &kind, &obj.name_any(), &value).await {
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        // The cache lags behind this applier's own writes: an object it
                        // created a moment ago (for an earlier reconcile) may not show yet.
                        // It is ours only if this field manager applied exactly this state.
                        match self.own_creation(api, &hash, want, &obj.name_any()).await? {
                            // In place: nothing written (the new member of a moved object
                            // whose child cache lags behind the relabel finds it here too).
                            Some(live) if labelled(live.meta(), obj.meta()) => {
                                self.remember_live(&live, &hash)?;
                                return Ok(Outcome::Unchanged);
                            }
                            // Ours, but its shard label was changed or removed (so the
                            // cache, which selects on it, cannot show it): put it back.
                            Some(_) => {
                                let params = PatchParams::apply(&self.field_manager).force();
                                api.patch(&obj.name_any(), &params, &Patch::Apply(&value))
                                    .await?
                            }
                            None => return Err(kube::Error::Api(s)),
                        }
                    }
                    other => other?,
                }
            }
            Decision::Apply => {
                let params = PatchParams::apply(&self.field_manager).force();
                api.patch(&obj.name_any(), &params, &Patch::Apply(&value))
                    .await?
            }
        };
        self.remember_live(&written, &hash)?;
        Ok(Outcome::Applied)
    }

    /// Remembers a live object (as written, or read) with the fingerprint of this field
    /// manager's fields in it.
    fn remember_live<K: Resource + Serialize>(
        &self,
        live: &K,
        hash: &str,
    ) -> Result<(), kube::Error> {
        let value = serde_json::to_value(live).map_err(kube::Error::SerdeError)?;
        let entries = live.meta().managed_fields.as_deref().unwrap_or_default();
        let owned = owned::live(&value, entries, &self.field_manager);
        self.remember(live.meta(), hash, Some(owned));
        Ok(())
    }

    /// The live object of that name when it is what this applier writes for `hash` / `want`:
    /// this field manager owns its fields with exactly the desired values (or, where the API
    /// server rewrote a value, carries the desired state's hash as applied by this manager).
    /// None for anyone else's object.
    async fn own_creation<K>(
        &self,
        api: &Api<K>,
        hash: &str,
        want: Fingerprint,
        name: &str,
    ) -> Result<Option<K>, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        let Some(live) = api.get_opt(name).await? else {
            return Ok(None);
        };
        let entries = live.meta().managed_fields.as_deref().unwrap_or_default();
        let value = serde_json::to_value(&live).map_err(kube::Error::SerdeError)?;
        let owned = owned::live(&value, entries, &self.field_manager);
        let annotated = live
            .meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(HASH_ANNOTATION))
            .map(String::as_str)
            == Some(hash);
        let ours = owned.fingerprint == Some(want) || (annotated && owned.fingerprint.is_some());
        Ok(ours.then_some(live))
    }

    fn remember(&self, meta: &ObjectMeta, hash: &str, owned: Option<owned::Owned>) {
        let applied = Applied {
            hash: hash_bits(hash),
            fingerprint: owned.and_then(|o| o.fingerprint).unwrap_or(0),
            marker: marker(meta),
        };
        self.memo().insert(uid_key(meta), applied);
    }

    /// Objects remembered (written or found in place, not yet deleted).
    pub fn remembered(&self) -> usize {
        self.memo().len()
    }

    /// Forgets what was remembered about the object with this UID (it was deleted). A
    /// cache built for this applier ([`crate::cache::ChildCache::watch_owned`]) calls this
    /// for every object it sees go.
    pub fn forget(&self, uid: &str) {
        self.forget_bits(owned::uid_bits(uid));
    }

    pub(crate) fn forget_bits(&self, uid: u128) {
        self.memo().remove(&uid);
    }

    /// Creates `value` unless an object of that name exists (409 AlreadyExists).
    async fn create<K>(
        &self,
        api: &Api<K>,
        kind: &str,
        name: &str,
        value: &serde_json::Value,
    ) -> Result<K, kube::Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        let params = PatchParams::apply(&self.field_manager).force();
        let exists = |detail: &str| {
            kube::Error::Api(
                Status::failure(
                    &format!("{kind} {name} already exists: it is not in the cache this applier reads ({detail})"),
                    "AlreadyExists",
                )
                .with_code(409)
                .boxed(),
            )
        };
        if !self.lock_refusing().contains(kind) {
            let mut guarded = value.clone();
            if let Some(meta) = guarded.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                meta.insert("resourceVersion".into(), NO_OBJECT_HAS.into());
            }
            match api.patch(name, &params, &Patch::Apply(&guarded)).await {
                Err(kube::Error::Api(s)) if s.code == 409 => return Err(exists(&s.message)),
                // Some kinds' storage refuses a resourceVersion on an apply that creates
                // (Services on v1.20): look first instead, from now on.
                Err(kube::Error::Api(s)) if s.message.contains("resourceVersion") => {
                    self.lock_refusing().insert(kind.to_string());
                }
                // Validation runs before the precondition: an apply merged with an existing
                // object into something invalid is refused as invalid, not as a conflict.
                Err(kube::Error::Api(s)) if s.code == 422 => {
                    if api.get_metadata_opt(name).await?.is_some() {
                        return Err(exists(&s.message));
                    }
                    return Err(kube::Error::Api(s));
                }
                other => return other,
            }
        }
        // Not atomic, unlike the guarded apply: an object created between the two requests
        // would be applied over. The window is one round trip.
        if api.get_metadata_opt(name).await?.is_some() {
            return Err(exists("found by name"));
        }
        api.patch(name, &params, &Patch::Apply(value)).await
    }

    fn lock_refusing(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.refuse_guarded_create
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use std::collections::BTreeMap;

    fn cm(data: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("k".to_string(), data.to_string())])),
            ..Default::default()
        }
    }

    fn meta(hash: &str, generation: Option<i64>, rv: &str) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(BTreeMap::from([(
                HASH_ANNOTATION.to_string(),
                hash.to_string(),
            )])),
            generation,
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_childs_shard_label_is_added_and_nothing_changes_unsharded() {
        let mut c = cm("a");
        c.metadata.labels = Some(BTreeMap::from([
            ("app".to_string(), "x".to_string()),
            ("shard.bosun.dev/op".to_string(), "stale".to_string()),
        ]));
        let before = desired_hash(&c).expect("hash");
        // Sharding off (no reconcile scope): the desired object, and so its hash, as it was.
        add_labels(&mut c.metadata, crate::shard::labels_in_scope());
        assert_eq!(desired_hash(&c).expect("hash"), before);
        // The owner's label wins over a stale one the desired object carried.
        add_labels(
            &mut c.metadata,
            BTreeMap::from([("shard.bosun.dev/op".to_string(), "m".to_string())]),
        );
        let labels = c.metadata.labels.expect("labels");
        assert_eq!(
            labels.get("shard.bosun.dev/op").map(String::as_str),
            Some("m")
        );
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
    }

    #[test]
    fn a_shard_label_counts_by_presence_not_value() {
        let mut c = cm("a");
        let unsharded = desired_hash(&c).expect("hash");
        // Unsharded, the hash is what it always was: an upgrade re-applies nothing.
        let bytes = serde_json::to_vec(&c).expect("json");
        assert_eq!(unsharded, hex::encode(&Sha256::digest(&bytes)[..12]));
        let on = |c: &mut ConfigMap, member: &str| {
            c.metadata.labels = Some(BTreeMap::from([
                ("app".to_string(), "x".to_string()),
                ("shard.bosun.dev/op".to_string(), member.to_string()),
            ]));
            desired_hash(c).expect("hash")
        };
        let (m1, m2) = (on(&mut c, "m1"), on(&mut c, "m2"));
        // A move changes the label's value only: the annotation still matches.
        assert_eq!(m1, m2);
        // A child without the label (made unsharded) differs: its member's apply labels it.
        c.metadata.labels = Some(BTreeMap::from([("app".to_string(), "x".to_string())]));
        assert_ne!(desired_hash(&c).expect("hash"), m1);
        // Anything else still counts.
        on(&mut c, "m1");
        c.data = Some(BTreeMap::from([("k".to_string(), "b".to_string())]));
        assert_ne!(desired_hash(&c).expect("hash"), m1);
    }

    #[test]
    fn labelled_wants_every_shard_label_with_its_value() {
        let with = |labels: &[(&str, &str)]| ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        };
        let desired = with(&[("app", "x"), ("shard.bosun.dev/op", "m1")]);
        assert!(labelled(&with(&[("shard.bosun.dev/op", "m1")]), &desired));
        assert!(!labelled(&with(&[("shard.bosun.dev/op", "m2")]), &desired));
        assert!(!labelled(&with(&[("app", "x")]), &desired));
        assert!(labelled(&ObjectMeta::default(), &with(&[("app", "x")])));
    }

    #[test]
    fn hash_tracks_desired_state() {
        let h = |v: &str| desired_hash(&cm(v)).expect("hash");
        assert_eq!(h("a"), h("a"));
        assert_ne!(h("a"), h("b"));
    }

    #[test]
    fn without_fingerprints_hash_and_marker_decide() {
        let a = Applier::new("test");
        let h = desired_hash(&cm("a")).expect("hash");
        let cur = |a: &Applier, hash: &str, m: Option<&ObjectMeta>| {
            a.decide(hash, 1, m) == Decision::InPlace
        };
        assert_eq!(a.decide(&h, 1, None), Decision::Create, "absent: create");
        assert!(
            !cur(&a, "other", Some(&meta(&h, None, "5"))),
            "hash differs"
        );
        // First sight after a restart: trusted, baseline taken.
        assert!(cur(&a, &h, Some(&meta(&h, None, "5"))));
        assert!(cur(&a, &h, Some(&meta(&h, None, "5"))));
        // Someone edited it: the resourceVersion moved.
        assert!(!cur(&a, &h, Some(&meta(&h, None, "9"))));
        // Generation, when present, is the marker: status-only changes do not force a write.
        let b = Applier::new("test");
        assert!(cur(&b, &h, Some(&meta(&h, Some(2), "5"))));
        assert!(cur(&b, &h, Some(&meta(&h, Some(2), "7"))));
        assert!(!cur(&b, &h, Some(&meta(&h, Some(3), "8"))));
    }

    #[test]
    fn fingerprints_decide_when_the_cache_keeps_them() {
        let a = Applier::new("test");
        let with = |fp: Option<u128>, uid: &str| {
            let mut m = meta("h", Some(1), "5");
            m.uid = Some(uid.into());
            owned::keep_summary(&mut m, "test", owned::Owned { fingerprint: fp });
            m
        };
        const WANT: u128 = 7;
        let decide = |hash: &str, m: ObjectMeta| a.decide(hash, WANT, Some(&m));
        assert_eq!(decide("a1", with(Some(WANT), "u")), Decision::InPlace);
        // The hash annotation matches but the owned fields do not: drift.
        assert_eq!(decide("a1", with(Some(8), "u")), Decision::Apply);
        // Owns nothing: everything taken away, or a copy someone else created.
        assert_eq!(decide("a1", with(None, "u")), Decision::Apply);
        // After a write, the fingerprint it produced counts as in place, for that UID only.
        let server_form = owned::Owned {
            fingerprint: Some(9),
        };
        a.remember(&with(None, "u"), "a1", Some(server_form));
        assert_eq!(decide("a1", with(Some(9), "u")), Decision::InPlace);
        assert_eq!(decide("a1", with(Some(9), "v")), Decision::Apply);
        assert_eq!(decide("a2", with(Some(9), "u")), Decision::Apply);
        a.forget("u");
        assert_eq!(decide("a1", with(Some(9), "u")), Decision::Apply);
    }
}
