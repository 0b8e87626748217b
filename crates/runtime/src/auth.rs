//! Authentication and authorization of `/metrics` when it is exposed beyond localhost, the way
//! kubebuilder's controller-runtime does it: the caller's bearer token is checked with a
//! TokenReview, then a SubjectAccessReview asks whether that user may `get` the non-resource
//! URL `/metrics`. Decisions are cached for a minute so scrapes do not load the API server.
//!
//! Anyone who reaches the endpoint chooses the token, so nothing an anonymous caller sends may
//! cost unbounded API calls or memory ([`AuthLimits`] holds the figures and why):
//!
//! * a token longer than any real one is refused (401) before any API call;
//! * decisions are cached under a SHA-256 of the token, never the token itself, in two
//!   bounded maps: grants apart from refusals, so a flood of junk tokens churns only the
//!   refusals and cannot evict a real scraper's entry;
//! * only definite answers are cached: an API error or a timeout says nothing about the token
//!   and is answered 503 (retry), not remembered as a 401/403 for a minute;
//! * reviews in flight are bounded; a request waits for a slot in FIFO order for at most a
//!   short while, then gets 503. Waiting absorbs bursts (several Prometheus replicas missing
//!   the cache together) instead of refusing them; the bound on the wait keeps a sustained
//!   flood from piling requests up, and a prompt 503 is what a scraper retries best.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::Client;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No or invalid credentials (HTTP 401).
    Unauthenticated,
    /// Valid credentials without permission (HTTP 403).
    Forbidden,
    /// No verdict: the API could not be asked, or too many reviews are in flight (HTTP 503).
    Unavailable,
}

/// Bounds on what an anonymous caller can make the authenticator do.
#[derive(Clone, Debug)]
pub struct AuthLimits {
    /// Longer tokens are refused without an API call. 8 KiB: a ServiceAccount token is about
    /// 1 KB, an OIDC token with group claims a few KB, and 8 KiB is the header-line limit of
    /// common proxies (nginx), so a longer token could not reach a real endpoint anyway.
    pub max_token_bytes: usize,
    /// Cached grants. Authorized scrapers are a handful (Prometheus replicas × token
    /// rotations); 256 leaves room for many.
    pub allowed_entries: usize,
    /// Cached refusals, so a misconfigured scraper repeating a bad token costs one review a
    /// minute. Each entry is ~50 bytes, so 1024 cost nothing.
    pub denied_entries: usize,
    /// Reviews in flight at once. A review is one or two small POSTs of a few ms; 4 keep the
    /// throughput in the hundreds per second while using at most 4 of the client's requests.
    pub concurrent_reviews: usize,
    /// How long a request waits for a review slot before 503.
    pub review_wait: Duration,
    /// How long one review may take before 503, so a hung API call cannot hold a slot for
    /// the client's default timeout (minutes).
    pub review_timeout: Duration,
    /// How long a decision is trusted.
    pub ttl: Duration,
}

impl Default for AuthLimits {
    fn default() -> Self {
        AuthLimits {
            max_token_bytes: 8 * 1024,
            allowed_entries: 256,
            denied_entries: 1024,
            concurrent_reviews: 4,
            review_wait: Duration::from_secs(1),
            review_timeout: Duration::from_secs(5),
            ttl: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum ReviewError {
    #[error("TokenReview failed: {0}")]
    TokenReview(kube::Error),
    #[error("SubjectAccessReview failed: {0}")]
    SubjectAccessReview(kube::Error),
    #[error("review timed out")]
    Timeout,
}

type Key = [u8; 32];

/// A map of at most `cap` decisions; when full, expired entries go first, then the oldest.
struct Bounded {
    cap: usize,
    entries: HashMap<Key, (Decision, Instant)>,
}

impl Bounded {
    fn new(cap: usize) -> Self {
        Bounded {
            cap,
            entries: HashMap::new(),
        }
    }

    fn get(&self, key: &Key, ttl: Duration) -> Option<Decision> {
        self.entries
            .get(key)
            .filter(|(_, at)| at.elapsed() < ttl)
            .map(|(d, _)| *d)
    }

    fn insert(&mut self, key: Key, d: Decision, ttl: Duration) {
        if self.cap == 0 {
            return;
        }
        if !self.entries.contains_key(&key) && self.entries.len() >= self.cap {
            self.entries.retain(|_, (_, at)| at.elapsed() < ttl);
            // Full of live entries: the oldest goes. A linear scan is fine: insertions are
            // bounded by the review concurrency, and `cap` is small.
            if self.entries.len() >= self.cap {
                if let Some(oldest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| *k)
                {
                    self.entries.remove(&oldest);
                }
            }
        }
        self.entries.insert(key, (d, Instant::now()));
    }
}

struct Cache {
    allowed: Bounded,
    denied: Bounded,
}

#[derive(Clone)]
pub struct MetricsAuth {
    client: Client,
    limits: Arc<AuthLimits>,
    cache: Arc<Mutex<Cache>>,
    reviews: Arc<Semaphore>,
}

fn key(path: &str, token: &str) -> Key {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(token.as_bytes());
    h.finalize().into()
}

impl MetricsAuth {
    pub fn new(client: Client) -> Self {
        Self::with_limits(client, AuthLimits::default())
    }

    pub fn with_limits(client: Client, limits: AuthLimits) -> Self {
        MetricsAuth {
            client,
            cache: Arc::new(Mutex::new(Cache {
                allowed: Bounded::new(limits.allowed_entries),
                denied: Bounded::new(limits.denied_entries),
            })),
            reviews: Arc::new(Semaphore::new(limits.concurrent_reviews.max(1))),
            limits: Arc::new(limits),
        }
    }

    /// Decisions held in the cache (grants and refusals).
    pub fn cached_entries(&self) -> usize {
        let c = self.lock();
        c.allowed.entries.len() + c.denied.entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn cached(&self, key: &Key) -> Option<Decision> {
        let c = self.lock();
        let ttl = self.limits.ttl;
        c.allowed.get(key, ttl).or_else(|| c.denied.get(key, ttl))
    }

    /// Decides for an `Authorization` header value.
    pub async fn check(&self, authorization: Option<&str>, path: &str) -> Decision {
        let Some(token) = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
        else {
            return Decision::Unauthenticated;
        };
        if token.len() > self.limits.max_token_bytes {
            return Decision::Unauthenticated;
        }
        let key = key(path, token);
        if let Some(d) = self.cached(&key) {
            return d;
        }
        let permit =
            match tokio::time::timeout(self.limits.review_wait, self.reviews.acquire()).await {
                Ok(Ok(p)) => p,
                _ => {
                    tracing::debug!("metrics authentication busy; answering 503");
                    return Decision::Unavailable;
                }
            };
        // A request for the same token may have been reviewed while this one waited.
        if let Some(d) = self.cached(&key) {
            return d;
        }
        let reviewed = tokio::time::timeout(self.limits.review_timeout, self.review(token, path))
            .await
            .unwrap_or(Err(ReviewError::Timeout));
        drop(permit);
        match reviewed {
            Ok(d) => {
                let ttl = self.limits.ttl;
                let mut c = self.lock();
                match d {
                    Decision::Allowed => c.allowed.insert(key, d, ttl),
                    _ => c.denied.insert(key, d, ttl),
                }
                d
            }
            Err(e) => {
                tracing::warn!(error = %e, "metrics authentication could not ask the API server");
                Decision::Unavailable
            }
        }
    }

    async fn review(&self, token: &str, path: &str) -> Result<Decision, ReviewError> {
        let tr = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &tr)
            .await
            .map_err(ReviewError::TokenReview)?;
        let Some(status) = reviewed.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(Decision::Unauthenticated);
        };
        let user = status.user.unwrap_or_default();
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &sar)
            .await
            .map_err(ReviewError::SubjectAccessReview)?;
        Ok(if decided.status.is_some_and(|s| s.allowed) {
            Decision::Allowed
        } else {
            Decision::Forbidden
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_cache_drops_the_oldest_entry() {
        let ttl = Duration::from_secs(60);
        let mut b = Bounded::new(2);
        b.insert([1; 32], Decision::Unauthenticated, ttl);
        b.insert([2; 32], Decision::Forbidden, ttl);
        b.insert([3; 32], Decision::Unauthenticated, ttl);
        assert_eq!(b.entries.len(), 2);
        assert_eq!(b.get(&[1; 32], ttl), None, "the oldest went");
        assert_eq!(b.get(&[2; 32], ttl), Some(Decision::Forbidden));
        assert_eq!(b.get(&[3; 32], ttl), Some(Decision::Unauthenticated));
        // Replacing a present key does not evict anything.
        b.insert([3; 32], Decision::Forbidden, ttl);
        assert_eq!(b.entries.len(), 2);
        assert_eq!(b.get(&[2; 32], ttl), Some(Decision::Forbidden));
    }

    #[test]
    fn keys_depend_on_path_and_token() {
        let k = key("/metrics", "secret-token");
        assert_ne!(k, key("/metrics", "secret-token2"));
        assert_ne!(k, key("/other", "secret-token"));
        assert_eq!(k.len(), 32);
    }
}
