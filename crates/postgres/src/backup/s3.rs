//! The S3-compatible store (feature `s3`): the same layout as the volume store under
//! `<prefix><cluster>/` in a bucket — `wals/<segment>`, `base/<id>/base.tar.gz` (the
//! `pg_basebackup` tar with its WAL and manifest, gzipped; backups made before streaming have
//! `base.tar`, `pg_wal.tar` and `backup_manifest` instead, uncompressed) and
//! `base/<id>/bosun-backup.json`, written last: a backup without its record is not one.
//! Path-style requests signed with SigV4 ([`super::sigv4`]) over bosun's own HTTP client
//! (hyper; rustls with the system's roots for `https://`).
//!
//! Nothing of a base backup is held whole, neither on disk nor in memory (issue 32, H10/H11).
//! Up: a writer cuts the stream into parts (default [`DEFAULT_PART_SIZE`],
//! `BOSUN_PG_S3_PART_SIZE`, the spec's `partSize`) sent as a multipart upload, with at most
//! two parts in memory, one being written and one going up; the length is not known
//! beforehand, so the part size doubles every 2,000 parts to stay within S3's 10,000. A failed
//! upload is aborted, so no parts linger. Down: [`BodyReader`] hands the GET body to a
//! blocking reader a frame at a time, and a body cut short is an error, never an early end.
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use super::catalog::BackupInfo;
use super::sigv4::{self, Credentials};
use super::volume::{StoreError, INFO_FILE};
use super::wal::is_archive_name;

/// How long a request, or a body that sends nothing, is waited for (unless configured:
/// `BOSUN_PG_S3_TIMEOUT_SECS`).
const TIMEOUT: Duration = Duration::from_secs(300);

/// S3's bounds on a multipart upload's parts (all but the last at least the minimum).
pub const MIN_PART_SIZE: u64 = 5 << 20;
pub const MAX_PART_SIZE: u64 = 5 << 30;
const MAX_PARTS: u64 = 10_000;
/// The part size unless configured.
pub const DEFAULT_PART_SIZE: u64 = 64 << 20;
/// A streamed upload's parts in memory at once: one being written, one going up.
const PARTS_IN_MEMORY: usize = 2;
/// A streamed upload keeps the configured part size for this many parts, then doubles it:
/// its length is not known beforehand, and S3 takes at most 10,000 parts. Five sizes fit:
/// 31 × 2,000 parts, 310 GiB at the 5 MiB minimum, 3.9 TiB at the default 64 MiB.
const PARTS_PER_SIZE: u64 = 2_000;

/// The part size for a file of `len` bytes: `configured`, or more when the file would
/// otherwise need more than S3's 10,000 parts.
pub fn part_size(configured: u64, len: u64) -> u64 {
    configured
        .clamp(MIN_PART_SIZE, MAX_PART_SIZE)
        .max(len.div_ceil(MAX_PARTS))
}

/// The size of part `number` (from 1) of a stream of unknown length: [`PARTS_PER_SIZE`]
/// parts of the configured size, then twice that, and so on, within S3's maximum.
pub fn stream_part_size(configured: u64, number: u64) -> u64 {
    let doublings = (number.saturating_sub(1) / PARTS_PER_SIZE).min(20) as u32;
    configured
        .clamp(MIN_PART_SIZE, MAX_PART_SIZE)
        .saturating_mul(1 << doublings)
        .min(MAX_PART_SIZE)
}

/// An answer: its status, ETag and body.
struct Answer {
    status: u16,
    etag: Option<String>,
    body: Bytes,
}

pub struct S3Store {
    /// `http` or `https`.
    scheme: &'static str,
    host: String,
    bucket: String,
    /// `<prefix><cluster>/`.
    root: String,
    region: String,
    creds: Credentials,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// Files above it are sent as a multipart upload, in parts of this size.
    part_size: u64,
    /// See [`TIMEOUT`].
    timeout: Duration,
}

fn remote(what: impl Into<String>) -> StoreError {
    StoreError::Remote(what.into())
}

impl S3Store {
    /// `endpoint` is `http[s]://host[:port]`; `root` the key prefix of the cluster's store.
    pub fn new(
        endpoint: &str,
        bucket: &str,
        root: &str,
        region: &str,
        creds: Credentials,
    ) -> Result<S3Store, StoreError> {
        let (scheme, rest) = if let Some(r) = endpoint.strip_prefix("https://") {
            ("https", r)
        } else if let Some(r) = endpoint.strip_prefix("http://") {
            ("http", r)
        } else {
            return Err(remote(format!(
                "endpoint {endpoint:?} is not http[s]://host[:port]"
            )));
        };
        let host = rest.trim_end_matches('/').to_string();
        if host.is_empty() || host.contains('/') {
            return Err(remote(format!(
                "endpoint {endpoint:?} is not http[s]://host[:port]"
            )));
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| remote(format!("TLS: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let mut root = root.trim_start_matches('/').to_string();
        if !root.is_empty() && !root.ends_with('/') {
            root.push('/');
        }
        Ok(S3Store {
            scheme,
            host,
            bucket: bucket.into(),
            root,
            region: region.into(),
            creds,
            http: Client::builder(TokioExecutor::new()).build(connector),
            part_size: DEFAULT_PART_SIZE,
            timeout: TIMEOUT,
        })
    }

    /// Requests, and bodies that send nothing, are given up after `timeout` (at least 1 s).
    pub fn with_timeout(mut self, timeout: Duration) -> S3Store {
        self.timeout = timeout.max(Duration::from_secs(1));
        self
    }

    /// Files above `bytes` go up in parts of `bytes` (kept within S3's 5 MiB-5 GiB).
    pub fn with_part_size(mut self, bytes: u64) -> S3Store {
        self.part_size = bytes.clamp(MIN_PART_SIZE, MAX_PART_SIZE);
        self
    }

    /// From a location `s3://<bucket>/<root>` and the environment: `BOSUN_PG_S3_ENDPOINT`,
    /// `BOSUN_PG_S3_REGION` (default us-east-1), `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`.
    pub fn from_location(location: &str) -> Result<S3Store, StoreError> {
        let rest = location
            .strip_prefix("s3://")
            .ok_or_else(|| remote(format!("{location:?} is not s3://bucket/prefix")))?;
        let (bucket, root) = rest.split_once('/').unwrap_or((rest, ""));
        let env = |k: &str| {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| remote(format!("{k} is not set")))
        };
        let part_size = match env("BOSUN_PG_S3_PART_SIZE") {
            Ok(v) => v.parse::<u64>().map_err(|_| {
                remote(format!(
                    "BOSUN_PG_S3_PART_SIZE {v:?} is not a number of bytes"
                ))
            })?,
            Err(_) => DEFAULT_PART_SIZE,
        };
        let timeout = match env("BOSUN_PG_S3_TIMEOUT_SECS") {
            Ok(v) => match v.parse::<u64>() {
                Ok(secs) if secs > 0 => Duration::from_secs(secs),
                _ => {
                    return Err(remote(format!(
                        "BOSUN_PG_S3_TIMEOUT_SECS {v:?} is not a positive number of seconds"
                    )))
                }
            },
            Err(_) => TIMEOUT,
        };
        Ok(S3Store::new(
            &env("BOSUN_PG_S3_ENDPOINT")?,
            bucket,
            root,
            &env("BOSUN_PG_S3_REGION").unwrap_or_else(|_| "us-east-1".into()),
            Credentials {
                access_key: env("AWS_ACCESS_KEY_ID")?,
                secret_key: env("AWS_SECRET_ACCESS_KEY")?,
            },
        )?
        .with_part_size(part_size)
        .with_timeout(timeout))
    }

    fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.root)
    }

    async fn send(
        &self,
        method: &str,
        key: Option<&str>,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<(u16, Bytes), StoreError> {
        let a = self.request(method, key, query, body).await?;
        Ok((a.status, a.body))
    }

    async fn request(
        &self,
        method: &str,
        key: Option<&str>,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Answer, StoreError> {
        let what = format!("{method} {}", key.unwrap_or(&self.bucket));
        let resp = self.respond(method, key, query, body).await?;
        let status = resp.status().as_u16();
        let etag = resp
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = tokio::time::timeout(self.timeout, resp.into_body().collect())
            .await
            .map_err(|_| remote(format!("{what}: timed out")))?
            .map_err(|e| remote(format!("{what}: {e}")))?
            .to_bytes();
        Ok(Answer { status, etag, body })
    }

    /// The signed request's answer, its body not yet read.
    async fn respond(
        &self,
        method: &str,
        key: Option<&str>,
        query: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<hyper::Response<Incoming>, StoreError> {
        let path = match key {
            Some(k) => format!("/{}/{}", self.bucket, sigv4::uri_encode(k, true)),
            None => format!("/{}", self.bucket),
        };
        let payload = sigv4::hex_sha256(&body);
        let amz_date = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
        let headers = [
            ("host", self.host.as_str()),
            ("x-amz-content-sha256", payload.as_str()),
            ("x-amz-date", amz_date.as_str()),
        ];
        let auth = sigv4::authorization(
            &sigv4::Request {
                method,
                path: &path,
                query,
                headers: &headers,
                payload_sha256: &payload,
            },
            &amz_date,
            &self.region,
            &self.creds,
        );
        let qs: Vec<String> = query
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    sigv4::uri_encode(k, false),
                    sigv4::uri_encode(v, false)
                )
            })
            .collect();
        let uri = if qs.is_empty() {
            format!("{}://{}{path}", self.scheme, self.host)
        } else {
            format!("{}://{}{path}?{}", self.scheme, self.host, qs.join("&"))
        };
        let req = hyper::Request::builder()
            .method(method)
            .uri(&uri)
            .header("x-amz-content-sha256", &payload)
            .header("x-amz-date", &amz_date)
            .header("authorization", auth)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| remote(format!("{method} {path}: {e}")))?;
        tokio::time::timeout(self.timeout, self.http.request(req))
            .await
            .map_err(|_| remote(format!("{method} {path}: timed out")))?
            .map_err(|e| remote(format!("{method} {path}: {e}")))
    }

    fn failed(method: &str, key: &str, status: u16, body: &[u8]) -> StoreError {
        let text = String::from_utf8_lossy(body);
        let code = between(&text, "<Code>", "</Code>").unwrap_or("");
        remote(format!("{method} {key}: HTTP {status} {code}"))
    }

    pub async fn create_bucket(&self) -> Result<(), StoreError> {
        let (status, body) = self.send("PUT", None, &[], Vec::new()).await?;
        match status {
            200..=299 | 409 => Ok(()),
            s => Err(Self::failed("PUT", &self.bucket, s, &body)),
        }
    }

    pub async fn put(&self, rel: &str, body: Vec<u8>) -> Result<(), StoreError> {
        let key = self.key(rel);
        let (status, resp) = self.send("PUT", Some(&key), &[], body).await?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(Self::failed("PUT", &key, status, &resp))
        }
    }

    /// Uploads the file at `src` as `rel`: one PUT up to the part size, a multipart upload
    /// above it (one part in memory at a time).
    pub async fn put_file(&self, rel: &str, src: &std::path::Path) -> Result<(), StoreError> {
        let io = |what: &'static str| {
            let path = src.to_path_buf();
            move |e| StoreError::Io {
                what,
                path,
                source: e,
            }
        };
        let mut file = std::fs::File::open(src).map_err(io("opening"))?;
        let len = file.metadata().map_err(io("reading"))?.len();
        if len <= self.part_size {
            let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
            std::io::Read::read_to_end(&mut file, &mut data).map_err(io("reading"))?;
            return self.put(rel, data).await;
        }
        let mut upload = self.begin_upload(rel).await?;
        let part = part_size(self.part_size, len);
        loop {
            let mut buf = Vec::with_capacity(usize::try_from(part).unwrap_or(0));
            let read =
                std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, part), &mut buf);
            let sent = match read {
                Ok(0) => break,
                Ok(_) => upload.send(buf).await,
                Err(e) => Err(remote(format!("reading {}: {e}", src.display()))),
            };
            if let Err(e) = sent {
                upload.abort().await;
                return Err(e);
            }
        }
        upload.complete().await
    }

    /// Starts a multipart upload of `rel`: [`Upload::complete`] makes the object,
    /// [`Upload::abort`] drops the parts sent.
    pub async fn begin_upload(&self, rel: &str) -> Result<Upload<'_>, StoreError> {
        let key = self.key(rel);
        let a = self
            .request("POST", Some(&key), &[("uploads", "")], Vec::new())
            .await?;
        if !(200..300).contains(&a.status) {
            return Err(Self::failed("POST uploads", &key, a.status, &a.body));
        }
        let text = String::from_utf8_lossy(&a.body);
        let id = between(&text, "<UploadId>", "</UploadId>")
            .map(unescape)
            .ok_or_else(|| remote(format!("POST uploads {key}: no UploadId in the answer")))?;
        Ok(Upload {
            store: self,
            key,
            id,
            etags: Vec::new(),
        })
    }

    /// A writer that cuts what is written into parts for [`S3Store::upload_parts`], and the
    /// parts' receiving end. At most two parts exist at a time (one being written, one
    /// going up), so a stream of any length goes up in the memory of two parts. The writer
    /// blocks: it belongs on a blocking thread (`spawn_blocking`).
    pub fn part_channel(&self) -> (PartWriter, Parts) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        (
            PartWriter {
                configured: self.part_size,
                buf: Vec::new(),
                permit: None,
                sent: 0,
                permits: std::sync::Arc::new(tokio::sync::Semaphore::new(PARTS_IN_MEMORY)),
                tx,
                rt: tokio::runtime::Handle::current(),
            },
            Parts { rx },
        )
    }

    /// Sends each part of `parts`' writer as a part of a new multipart upload of `rel`, until
    /// the writer is finished or dropped. Whether the upload becomes an object is the
    /// caller's call ([`Upload::complete`] when what was written is whole, else
    /// [`Upload::abort`]); on an error here it is aborted, and the writer's next part fails.
    pub async fn upload_parts(
        &self,
        rel: &str,
        mut parts: Parts,
    ) -> Result<Upload<'_>, StoreError> {
        let mut upload = self.begin_upload(rel).await?;
        while let Some((data, permit)) = parts.rx.recv().await {
            let sent = upload.send(data).await;
            // The part's memory is free again: the writer may start another.
            drop(permit);
            if let Err(e) = sent {
                upload.abort().await;
                return Err(e);
            }
        }
        Ok(upload)
    }

    pub async fn get(&self, rel: &str) -> Result<Option<Bytes>, StoreError> {
        let key = self.key(rel);
        let (status, body) = self.send("GET", Some(&key), &[], Vec::new()).await?;
        match status {
            200..=299 => Ok(Some(body)),
            404 => Ok(None),
            s => Err(Self::failed("GET", &key, s, &body)),
        }
    }

    /// The object's body as it arrives, for a blocking reader; None when there is no such
    /// object. The body is never held whole: a restore of any size reads a frame at a time.
    pub async fn get_reader(&self, rel: &str) -> Result<Option<BodyReader>, StoreError> {
        let key = self.key(rel);
        let resp = self.respond("GET", Some(&key), &[], Vec::new()).await?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let body = tokio::time::timeout(self.timeout, resp.into_body().collect())
                .await
                .ok()
                .and_then(Result::ok)
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return match status {
                404 => Ok(None),
                s => Err(Self::failed("GET", &key, s, &body)),
            };
        }
        let length = resp
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        Ok(Some(BodyReader {
            key,
            timeout: self.timeout,
            body: resp.into_body(),
            chunk: Bytes::new(),
            length,
            read: 0,
            rt: tokio::runtime::Handle::current(),
        }))
    }

    /// The object's ETag (a multipart upload's ends in `-<number of parts>`); None when
    /// there is no such object.
    pub async fn etag(&self, rel: &str) -> Result<Option<String>, StoreError> {
        let key = self.key(rel);
        let a = self.request("HEAD", Some(&key), &[], Vec::new()).await?;
        match a.status {
            200..=299 => Ok(a.etag),
            404 => Ok(None),
            s => Err(Self::failed("HEAD", &key, s, &a.body)),
        }
    }

    pub async fn delete(&self, rel: &str) -> Result<(), StoreError> {
        let key = self.key(rel);
        let (status, body) = self.send("DELETE", Some(&key), &[], Vec::new()).await?;
        match status {
            200..=299 | 404 => Ok(()),
            s => Err(Self::failed("DELETE", &key, s, &body)),
        }
    }

    /// Keys under `rel` (relative to the store's root), every page.
    pub async fn list(&self, rel: &str) -> Result<Vec<String>, StoreError> {
        let prefix = self.key(rel);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut q: Vec<(&str, &str)> = vec![("list-type", "2"), ("prefix", &prefix)];
            if let Some(t) = &token {
                q.push(("continuation-token", t));
            }
            let (status, body) = self.send("GET", None, &q, Vec::new()).await?;
            if !(200..300).contains(&status) {
                return Err(Self::failed("LIST", &prefix, status, &body));
            }
            let text = String::from_utf8_lossy(&body).into_owned();
            for k in all_between(&text, "<Key>", "</Key>") {
                if let Some(r) = unescape(k).strip_prefix(&self.root) {
                    out.push(r.to_string());
                }
            }
            token =
                between(&text, "<NextContinuationToken>", "</NextContinuationToken>").map(unescape);
            if token.is_none() || between(&text, "<IsTruncated>", "</IsTruncated>") != Some("true")
            {
                break;
            }
        }
        Ok(out)
    }

    /// Keys under the store's root with a multipart upload begun and neither completed nor
    /// aborted (the first 1,000): what an aborted backup must not leave behind.
    pub async fn uploads(&self) -> Result<Vec<String>, StoreError> {
        let (status, body) = self
            .send(
                "GET",
                None,
                &[("prefix", &self.root), ("uploads", "")],
                Vec::new(),
            )
            .await?;
        if !(200..300).contains(&status) {
            return Err(Self::failed("LIST uploads", &self.root, status, &body));
        }
        let text = String::from_utf8_lossy(&body);
        Ok(all_between(&text, "<Key>", "</Key>")
            .into_iter()
            .filter_map(|k| unescape(k).strip_prefix(&self.root).map(str::to_string))
            .collect())
    }

    pub async fn archive_wal(&self, src: &std::path::Path, name: &str) -> Result<(), StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let data = std::fs::read(src).map_err(|e| StoreError::Io {
            what: "reading",
            path: src.to_path_buf(),
            source: e,
        })?;
        let rel = format!("wals/{name}");
        if let Some(existing) = self.get(&rel).await? {
            return if existing[..] == data[..] {
                Ok(())
            } else {
                Err(StoreError::Conflict(name.into()))
            };
        }
        self.put(&rel, data).await
    }

    pub async fn restore_wal(
        &self,
        name: &str,
        dest: &std::path::Path,
    ) -> Result<bool, StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let Some(data) = self.get(&format!("wals/{name}")).await? else {
            return Ok(false);
        };
        let tmp = dest.with_extension("bosun-tmp");
        let io = |what, e| StoreError::Io {
            what,
            path: tmp.clone(),
            source: e,
        };
        std::fs::write(&tmp, &data).map_err(|e| io("writing", e))?;
        std::fs::rename(&tmp, dest).map_err(|e| io("renaming", e))?;
        Ok(true)
    }

    /// Whether the archive holds `name` (a HEAD: nothing is downloaded).
    pub async fn has_wal(&self, name: &str) -> Result<bool, StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        let key = self.key(&format!("wals/{name}"));
        let a = self.request("HEAD", Some(&key), &[], Vec::new()).await?;
        match a.status {
            200..=299 => Ok(true),
            404 => Ok(false),
            s => Err(Self::failed("HEAD", &key, s, &a.body)),
        }
    }

    pub async fn wal_names(&self) -> Result<Vec<String>, StoreError> {
        let mut v: Vec<String> = self
            .list("wals/")
            .await?
            .into_iter()
            .filter_map(|k| k.strip_prefix("wals/").map(str::to_string))
            .filter(|n| is_archive_name(n))
            .collect();
        v.sort();
        Ok(v)
    }

    /// Complete backups (those with their record), oldest first.
    pub async fn backups(&self) -> Result<Vec<BackupInfo>, StoreError> {
        let mut out = Vec::new();
        for k in self.list("base/").await? {
            let Some(id) = k
                .strip_prefix("base/")
                .and_then(|r| r.strip_suffix(&format!("/{INFO_FILE}")))
            else {
                continue;
            };
            if let Some(body) = self.get(&k).await? {
                if let Ok(b) = serde_json::from_slice::<BackupInfo>(&body) {
                    if b.id == id {
                        out.push(b);
                    }
                }
            }
        }
        out.sort_by(|a, b| a.finished.cmp(&b.finished).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Removes a backup: its record first, so it stops being one at once.
    pub async fn delete_backup(&self, id: &str) -> Result<(), StoreError> {
        self.delete(&format!("base/{id}/{INFO_FILE}")).await?;
        for k in self.list(&format!("base/{id}/")).await? {
            self.delete(&k).await?;
        }
        Ok(())
    }

    pub async fn delete_wal(&self, name: &str) -> Result<(), StoreError> {
        if !is_archive_name(name) {
            return Err(StoreError::BadName(name.into()));
        }
        self.delete(&format!("wals/{name}")).await
    }
}

/// A multipart upload under way. Dropped without [`Upload::complete`] or [`Upload::abort`]
/// (the process killed), its parts stay on the store, unlisted, until the bucket's lifecycle
/// rule for incomplete uploads removes them; no backup is listed without its record.
pub struct Upload<'a> {
    store: &'a S3Store,
    key: String,
    id: String,
    etags: Vec<String>,
}

impl Upload<'_> {
    /// Sends the next part (all but the last at least [`MIN_PART_SIZE`]).
    pub async fn send(&mut self, data: Vec<u8>) -> Result<(), StoreError> {
        if self.etags.len() as u64 >= MAX_PARTS {
            return Err(remote(format!(
                "{}: more than S3's {MAX_PARTS} parts (raise the part size)",
                self.key
            )));
        }
        let number = (self.etags.len() + 1).to_string();
        let a = self
            .store
            .request(
                "PUT",
                Some(&self.key),
                &[("partNumber", &number), ("uploadId", &self.id)],
                data,
            )
            .await?;
        if !(200..300).contains(&a.status) {
            return Err(S3Store::failed(
                &format!("PUT part {number}"),
                &self.key,
                a.status,
                &a.body,
            ));
        }
        let etag = a
            .etag
            .ok_or_else(|| remote(format!("PUT part {number} {}: no ETag", self.key)))?;
        self.etags.push(etag);
        Ok(())
    }

    /// The parts sent so far.
    pub fn parts(&self) -> usize {
        self.etags.len()
    }

    /// Makes the object of the parts sent (aborting the upload when that fails).
    pub async fn complete(self) -> Result<(), StoreError> {
        let mut xml = String::from("<CompleteMultipartUpload>");
        for (i, etag) in self.etags.iter().enumerate() {
            xml.push_str(&format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
                i + 1,
                escape(etag)
            ));
        }
        xml.push_str("</CompleteMultipartUpload>");
        let done = match self
            .store
            .request(
                "POST",
                Some(&self.key),
                &[("uploadId", &self.id)],
                xml.into_bytes(),
            )
            .await
        {
            // S3 may answer 200 and report the failure in the body.
            Ok(a)
                if (200..300).contains(&a.status)
                    && !String::from_utf8_lossy(&a.body).contains("<Error>") =>
            {
                Ok(())
            }
            Ok(a) => Err(S3Store::failed(
                "POST complete",
                &self.key,
                a.status,
                &a.body,
            )),
            Err(e) => Err(e),
        };
        if done.is_err() {
            self.abort().await;
        }
        done
    }

    /// Drops the parts sent: parts of an upload never completed are kept (and billed) until
    /// aborted.
    pub async fn abort(self) {
        if let Err(e) = self
            .store
            .request(
                "DELETE",
                Some(&self.key),
                &[("uploadId", &self.id)],
                Vec::new(),
            )
            .await
        {
            tracing::warn!(key = %self.key, error = %e, "aborting a multipart upload failed");
        }
    }
}

/// A part and the permit that counts it among the parts in memory.
type Part = (Vec<u8>, tokio::sync::OwnedSemaphorePermit);

/// The receiving end of [`S3Store::part_channel`].
pub struct Parts {
    rx: tokio::sync::mpsc::Receiver<Part>,
}

/// Bytes written are cut into parts ([`stream_part_size`]) sent to [`S3Store::upload_parts`].
/// A write waits while two parts are in memory; it fails once the upload has stopped.
pub struct PartWriter {
    configured: u64,
    buf: Vec<u8>,
    /// Held while `buf` is a part being written.
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    /// Parts sent.
    sent: u64,
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    tx: tokio::sync::mpsc::Sender<Part>,
    rt: tokio::runtime::Handle,
}

fn upload_stopped() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the upload stopped")
}

impl PartWriter {
    fn part_len(&self) -> usize {
        usize::try_from(stream_part_size(self.configured, self.sent + 1)).unwrap_or(usize::MAX)
    }

    fn start_part(&mut self) -> std::io::Result<()> {
        if self.permit.is_none() {
            let permit = self
                .rt
                .block_on(self.permits.clone().acquire_owned())
                .map_err(|_| upload_stopped())?;
            self.permit = Some(permit);
            self.buf = Vec::with_capacity(self.part_len());
        }
        Ok(())
    }

    fn ship(&mut self) -> std::io::Result<()> {
        let permit = self.permit.take().ok_or_else(upload_stopped)?;
        let data = std::mem::take(&mut self.buf);
        self.tx
            .blocking_send((data, permit))
            .map_err(|_| upload_stopped())?;
        self.sent += 1;
        Ok(())
    }

    /// Sends the last part: what was written is the whole stream.
    pub fn finish(mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() || self.sent == 0 {
            self.start_part()?;
            self.ship()?;
        }
        Ok(())
    }
}

impl std::io::Write for PartWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        self.start_part()?;
        let len = self.part_len();
        let n = (len - self.buf.len()).min(data.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() >= len {
            self.ship()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An object's body as it arrives ([`S3Store::get_reader`]). It blocks: it belongs on a
/// blocking thread. A body that ends before its `Content-Length`, breaks off or stalls for
/// the request timeout is an error, never an early end.
pub struct BodyReader {
    key: String,
    /// A body that sends nothing for this long is an error.
    timeout: Duration,
    body: Incoming,
    chunk: Bytes,
    length: Option<u64>,
    read: u64,
    rt: tokio::runtime::Handle,
}

impl std::io::Read for BodyReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        use std::io::{Error, ErrorKind};
        if out.is_empty() {
            return Ok(0);
        }
        while self.chunk.is_empty() {
            let body = &mut self.body;
            let frame = self
                .rt
                .block_on(tokio::time::timeout(self.timeout, body.frame()))
                .map_err(|_| {
                    Error::new(
                        ErrorKind::TimedOut,
                        format!("GET {}: no data for {:?}", self.key, self.timeout),
                    )
                })?;
            match frame {
                None => {
                    return match self.length {
                        Some(len) if len != self.read => Err(Error::new(
                            ErrorKind::UnexpectedEof,
                            format!(
                                "GET {}: the body ended after {} of {len} bytes",
                                self.key, self.read
                            ),
                        )),
                        _ => Ok(0),
                    }
                }
                Some(Err(e)) => return Err(Error::other(format!("GET {}: {e}", self.key))),
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.chunk = data;
                    }
                }
            }
        }
        let n = out.len().min(self.chunk.len());
        out[..n].copy_from_slice(&self.chunk.split_to(n));
        self.read += n as u64;
        Ok(n)
    }
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(&text[start..end])
}

fn all_between<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(s) = rest.find(open) {
        let after = &rest[s + open.len()..];
        let Some(e) = after.find(close) else { break };
        out.push(&after[..e]);
        rest = &after[e + close.len()..];
    }
    out
}

/// `&`, `<`, `>` and `"` as XML entities (an ETag is quoted).
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The five XML entities (keys written here never hold others).
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_answers_are_read() {
        let xml = "<ListBucketResult><IsTruncated>true</IsTruncated>\
                   <Contents><Key>pg/wals/000000010000000000000001</Key></Contents>\
                   <Contents><Key>pg/a&amp;b</Key></Contents>\
                   <NextContinuationToken>t1</NextContinuationToken></ListBucketResult>";
        assert_eq!(
            all_between(xml, "<Key>", "</Key>"),
            ["pg/wals/000000010000000000000001", "pg/a&amp;b"]
        );
        assert_eq!(unescape("pg/a&amp;b"), "pg/a&b");
        assert_eq!(
            between(xml, "<NextContinuationToken>", "</NextContinuationToken>"),
            Some("t1")
        );
    }

    #[test]
    fn parts_stay_within_s3s_bounds() {
        assert_eq!(part_size(DEFAULT_PART_SIZE, 1 << 30), DEFAULT_PART_SIZE);
        assert_eq!(part_size(1, 1 << 30), MIN_PART_SIZE);
        // 1 TiB in 64 MiB parts would be 16,384 parts: the parts grow to fit in 10,000.
        let tib = 1u64 << 40;
        let p = part_size(DEFAULT_PART_SIZE, tib);
        assert!(p > DEFAULT_PART_SIZE && tib.div_ceil(p) <= MAX_PARTS, "{p}");
        assert_eq!(escape("\"abc\""), "&quot;abc&quot;");
    }

    #[test]
    fn a_stream_of_unknown_length_fits_in_s3s_parts() {
        let total = |configured: u64| -> u64 {
            (1..=MAX_PARTS)
                .map(|n| stream_part_size(configured, n))
                .sum()
        };
        assert_eq!(stream_part_size(DEFAULT_PART_SIZE, 1), DEFAULT_PART_SIZE);
        assert_eq!(
            stream_part_size(DEFAULT_PART_SIZE, PARTS_PER_SIZE),
            DEFAULT_PART_SIZE
        );
        assert_eq!(
            stream_part_size(DEFAULT_PART_SIZE, PARTS_PER_SIZE + 1),
            2 * DEFAULT_PART_SIZE
        );
        assert_eq!(stream_part_size(1, 1), MIN_PART_SIZE);
        assert!(stream_part_size(MAX_PART_SIZE, MAX_PARTS) <= MAX_PART_SIZE);
        assert!(total(MIN_PART_SIZE) >= 300 << 30);
        assert!(total(DEFAULT_PART_SIZE) >= 3 << 40);
    }

    /// What is written comes out as parts of the part size, in order, the last one short.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_written_stream_is_cut_into_parts() {
        let c = Credentials {
            access_key: "a".into(),
            secret_key: "b".into(),
        };
        let store = S3Store::new("http://127.0.0.1:9", "bkt", "pg", "us-east-1", c)
            .expect("store")
            .with_part_size(MIN_PART_SIZE);
        let (mut writer, mut parts) = store.part_channel();
        let data: Vec<u8> = (0..2 * MIN_PART_SIZE + 12_345)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let sent = data.clone();
        let writing = tokio::task::spawn_blocking(move || {
            for chunk in sent.chunks(100_000) {
                std::io::Write::write_all(&mut writer, chunk)?;
            }
            writer.finish()
        });
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        while let Some((part, permit)) = parts.rx.recv().await {
            sizes.push(part.len() as u64);
            got.extend_from_slice(&part);
            drop(permit);
        }
        writing.await.expect("join").expect("written");
        assert_eq!(sizes, [MIN_PART_SIZE, MIN_PART_SIZE, 12_345]);
        assert!(got == data, "the parts differ from what was written");
    }

    #[test]
    fn endpoints_are_http_or_https_urls_of_a_host() {
        let c = || Credentials {
            access_key: "a".into(),
            secret_key: "b".into(),
        };
        assert!(S3Store::new("http://127.0.0.1:9000", "bkt", "pg", "us-east-1", c()).is_ok());
        assert!(S3Store::new("https://s3.amazonaws.com", "bkt", "pg", "us-east-1", c()).is_ok());
        assert!(S3Store::new("ftp://h", "bkt", "pg", "us-east-1", c()).is_err());
        assert!(S3Store::new("http://h/x", "bkt", "pg", "us-east-1", c()).is_err());
    }
}
