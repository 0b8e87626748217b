//! Authentication and authorization of `/metrics` when it is exposed beyond localhost, the way
//! kubebuilder's controller-runtime does it: the caller's bearer token is checked with a
//! TokenReview, then a SubjectAccessReview asks whether that user may `get` the non-resource
//! URL `/metrics`. Decisions are cached for a minute so scrapes do not load the API server.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::Client;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No or invalid credentials (HTTP 401).
    Unauthenticated,
    /// Valid credentials without permission (HTTP 403).
    Forbidden,
    /// No verdict: the API could not be asked (HTTP 503).
    Unavailable,
}

/// Bounds on what an anonymous caller can make the authenticator do.
#[derive(Clone, Debug)]
pub struct AuthLimits {
    pub max_token_bytes: usize,
    pub allowed_entries: usize,
    pub denied_entries: usize,
    pub concurrent_reviews: usize,
    pub review_wait: Duration,
    pub review_timeout: Duration,
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
            ttl: TTL,
        }
    }
}

#[derive(Clone)]
pub struct MetricsAuth {
    client: Client,
    cache: Arc<Mutex<HashMap<String, (Decision, Instant)>>>,
}

const TTL: Duration = Duration::from_secs(60);

impl MetricsAuth {
    /// Not enforced yet (the tests of issue 12 finding 9 come first).
    pub fn with_limits(client: Client, _limits: AuthLimits) -> Self {
        Self::new(client)
    }

    pub fn cached_entries(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn new(client: Client) -> Self {
        MetricsAuth {
            client,
            cache: Arc::default(),
        }
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
        let key = format!("{path}\u{0}{token}");
        if let Some((d, at)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            if at.elapsed() < TTL {
                return *d;
            }
        }
        let d = self.review(token, path).await;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|_, (_, at)| at.elapsed() < TTL);
        cache.insert(key, (d, Instant::now()));
        d
    }

    async fn review(&self, token: &str, path: &str) -> Decision {
        let tr = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = match Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &tr)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "TokenReview failed");
                return Decision::Unauthenticated;
            }
        };
        let Some(status) = reviewed.status.filter(|s| s.authenticated == Some(true)) else {
            return Decision::Unauthenticated;
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
        match Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &sar)
            .await
        {
            Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => Decision::Allowed,
            Ok(_) => Decision::Forbidden,
            Err(e) => {
                tracing::warn!(error = %e, "SubjectAccessReview failed");
                Decision::Forbidden
            }
        }
    }
}
