//! A store by its location: a directory (the backup volume), or `s3://bucket/prefix` (feature
//! `s3`; endpoint, region and credentials from the environment). The operations both offer;
//! base backups and restores differ in format and live in the instance manager.
use std::path::Path;

use super::catalog::BackupInfo;
use super::owner::{self, Owner, OwnerRecord, Verdict};
use super::volume::{StoreError, VolumeStore};

pub enum Store {
    Volume(VolumeStore),
    #[cfg(feature = "s3")]
    S3(Box<super::s3::S3Store>),
}

impl Store {
    pub fn open(location: &str) -> Result<Store, StoreError> {
        if location.starts_with("s3://") {
            #[cfg(feature = "s3")]
            return Ok(Store::S3(Box::new(super::s3::S3Store::from_location(
                location,
            )?)));
            #[cfg(not(feature = "s3"))]
            return Err(StoreError::Remote(
                "this bosun is built without the `s3` feature".into(),
            ));
        }
        Ok(Store::Volume(VolumeStore::new(location)))
    }

    pub async fn archive_wal(&self, src: &Path, name: &str) -> Result<(), StoreError> {
        match self {
            Store::Volume(v) => v.archive_wal(src, name),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.archive_wal(src, name).await,
        }
    }

    pub async fn restore_wal(&self, name: &str, dest: &Path) -> Result<bool, StoreError> {
        match self {
            Store::Volume(v) => v.restore_wal(name, dest),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.restore_wal(name, dest).await,
        }
    }

    pub async fn has_wal(&self, name: &str) -> Result<bool, StoreError> {
        match self {
            Store::Volume(v) => v.has_wal(name),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.has_wal(name).await,
        }
    }

    pub async fn backups(&self) -> Result<Vec<BackupInfo>, StoreError> {
        match self {
            Store::Volume(v) => v.backups(),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.backups().await,
        }
    }

    pub async fn wal_names(&self) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Volume(v) => v.wal_names(),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.wal_names().await,
        }
    }

    pub async fn delete_backup(&self, id: &str) -> Result<(), StoreError> {
        match self {
            Store::Volume(v) => v.delete_backup(id),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.delete_backup(id).await,
        }
    }

    pub async fn delete_wal(&self, name: &str) -> Result<(), StoreError> {
        match self {
            Store::Volume(v) => v.delete_wal(name),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.delete_wal(name).await,
        }
    }

    /// The owner record, if the store has one (an unreadable one is an error, never "none":
    /// that would let any cluster claim the store).
    pub async fn owner(&self) -> Result<Option<OwnerRecord>, StoreError> {
        let bytes = match self {
            Store::Volume(v) => v.read_root(owner::OWNER_FILE)?,
            #[cfg(feature = "s3")]
            Store::S3(s) => s.get(owner::OWNER_FILE).await?.map(|b| b.to_vec()),
        };
        bytes
            .map(|b| {
                serde_json::from_slice(&b).map_err(|e| {
                    StoreError::Remote(format!("the store's {}: {e}", owner::OWNER_FILE))
                })
            })
            .transpose()
    }

    /// No WAL and no backup (an owner record alone is empty).
    pub async fn is_empty(&self) -> Result<bool, StoreError> {
        match self {
            Store::Volume(v) => v.is_empty(),
            #[cfg(feature = "s3")]
            Store::S3(s) => Ok(s
                .list("")
                .await?
                .iter()
                .all(|k| k.trim_start_matches('/') == owner::OWNER_FILE)),
        }
    }

    /// Whether `me` may write here, recording it as the owner first when it claims the store.
    pub async fn ensure_owner(&self, me: &Owner) -> Result<(), StoreError> {
        let record = self.owner().await?;
        let empty = match &record {
            Some(_) => false,
            None => self.is_empty().await?,
        };
        match owner::verdict(record.as_ref(), empty, me) {
            Verdict::Ours => Ok(()),
            Verdict::Record(r) => {
                let text = serde_json::to_vec_pretty(&r).unwrap_or_default();
                match self {
                    Store::Volume(v) => v.write_root(owner::OWNER_FILE, &text),
                    #[cfg(feature = "s3")]
                    Store::S3(s) => s.put(owner::OWNER_FILE, text).await,
                }
            }
            Verdict::Refuse(why) => Err(StoreError::NotOwner(why)),
        }
    }

    /// Why `me` may not write here (None: it may, or may claim it). Reads only.
    pub async fn refusal(&self, me: &Owner) -> Result<Option<String>, StoreError> {
        let record = self.owner().await?;
        let empty = match &record {
            Some(_) => false,
            None => self.is_empty().await?,
        };
        Ok(match owner::verdict(record.as_ref(), empty, me) {
            Verdict::Refuse(why) => Some(why),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::owner::Claim;

    fn me(uid: &str, claim: Claim) -> Owner {
        Owner {
            uid: uid.into(),
            cluster: "pg".into(),
            claim,
        }
    }

    #[tokio::test]
    async fn the_first_writer_owns_the_store_and_another_uid_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let store = Store::Volume(VolumeStore::new(d.path().join("pg")));
        store
            .ensure_owner(&me("a", Claim::Empty))
            .await
            .expect("claimed");
        let seg = d.path().join("seg");
        std::fs::write(&seg, b"wal").expect("write");
        store
            .archive_wal(&seg, "000000010000000000000001")
            .await
            .expect("archived");
        store
            .ensure_owner(&me("a", Claim::Empty))
            .await
            .expect("still ours");
        for claim in [Claim::Empty, Claim::Adopt] {
            let e = store.ensure_owner(&me("b", claim)).await;
            assert!(
                matches!(e, Err(StoreError::NotOwner(_))),
                "{claim:?}: {e:?}"
            );
            assert!(store
                .refusal(&me("b", claim))
                .await
                .expect("read")
                .is_some());
        }
        // Taken over by a cluster that restores from it: then the old one is refused.
        store
            .ensure_owner(&me("b", Claim::TakeOver))
            .await
            .expect("taken over");
        let r = store.owner().await.expect("read").expect("record");
        assert_eq!(
            (r.cluster_uid.as_str(), r.previous),
            ("b", vec!["a".into()])
        );
        assert!(store
            .refusal(&me("a", Claim::Empty))
            .await
            .expect("read")
            .is_some());
    }

    #[tokio::test]
    async fn a_store_with_data_but_no_record_is_refused_unless_adopted() {
        let d = tempfile::tempdir().expect("tempdir");
        let v = VolumeStore::new(d.path().join("pg"));
        let seg = d.path().join("seg");
        std::fs::write(&seg, b"wal").expect("write");
        v.archive_wal(&seg, "000000010000000000000001")
            .expect("archived");
        let store = Store::Volume(v);
        assert!(!store.is_empty().await.expect("read"));
        assert!(matches!(
            store.ensure_owner(&me("a", Claim::Empty)).await,
            Err(StoreError::NotOwner(_))
        ));
        store
            .ensure_owner(&me("a", Claim::Adopt))
            .await
            .expect("adopted");
        store
            .ensure_owner(&me("a", Claim::Empty))
            .await
            .expect("now recorded as its own");
    }

    #[tokio::test]
    async fn a_torn_record_is_an_error_not_an_unowned_store() {
        let d = tempfile::tempdir().expect("tempdir");
        let v = VolumeStore::new(d.path());
        std::fs::write(d.path().join(crate::backup::owner::OWNER_FILE), b"{").expect("w");
        let store = Store::Volume(v);
        assert!(matches!(
            store.ensure_owner(&me("a", Claim::TakeOver)).await,
            Err(StoreError::Remote(_))
        ));
    }
}
