//! The session: connect, log in and out, and every call's path — count it, POST it, decode it,
//! and when the session has gone (`NotAuthenticated`) log in once more and retry once.
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Config;
use crate::counter::CallCounts;
use crate::error::{Error, FaultKind, Result};
use crate::soap::{self, param};
use crate::transport::Transport;
use crate::types::{MoRef, ServiceContent};
use crate::xml::Element;

/// vim25 6.5 is spoken by vCenter 6.5 up to 8 and by vcsim 0.24; every call used here exists
/// in it unchanged.
const SOAP_ACTION: &str = "urn:vim25/6.5";

/// A logged-in vSphere client. Cheap to clone; clones share the session and the counters.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    transport: Transport,
    user: String,
    password: String,
    content: ServiceContent,
    cookie: Mutex<Option<String>>,
    relogin: tokio::sync::Mutex<()>,
    counts: Arc<CallCounts>,
    pub(crate) task_timeout: Duration,
    /// Custom field keys by name: a key never changes while its field exists.
    pub(crate) fields: Mutex<std::collections::BTreeMap<String, i32>>,
}

impl Client {
    /// Reads the service content and logs in.
    pub async fn connect(config: Config) -> Result<Self> {
        let transport = Transport::new(&config.url, &config.tls, config.request_timeout)?;
        let counts = config.counts.clone();
        let instance = MoRef::new("ServiceInstance", "ServiceInstance");
        let method = "RetrieveServiceContent";
        counts.add(method);
        let reply = transport
            .post(SOAP_ACTION, None, soap::envelope(method, &instance, ""))
            .await?;
        let resp = soap::response(method, &reply.body)?;
        let content = service_content(&resp)?;
        let client = Self {
            inner: Arc::new(Inner {
                transport,
                user: config.user,
                password: config.password,
                content,
                cookie: Mutex::new(None),
                relogin: tokio::sync::Mutex::new(()),
                counts,
                task_timeout: config.task_timeout,
                fields: Mutex::default(),
            }),
        };
        client.login().await?;
        Ok(client)
    }

    pub fn content(&self) -> &ServiceContent {
        &self.inner.content
    }

    /// Calls made so far, per vim25 method name (retries and re-logins included), on the
    /// counter of its [`Config::counts`] (shared with other clients made with it).
    pub fn counts(&self) -> &CallCounts {
        &self.inner.counts
    }

    pub(crate) fn task_timeout(&self) -> Duration {
        self.inner.task_timeout
    }

    pub(crate) fn fields(&self) -> &Mutex<std::collections::BTreeMap<String, i32>> {
        &self.inner.fields
    }

    fn cookie(&self) -> Option<String> {
        self.inner.cookie.lock().ok().and_then(|c| c.clone())
    }

    fn set_cookie(&self, value: Option<String>) {
        if let Ok(mut c) = self.inner.cookie.lock() {
            *c = value;
        }
    }

    async fn login(&self) -> Result<()> {
        let method = "Login";
        let params = format!(
            "{}{}",
            param("userName", &self.inner.user),
            param("password", &self.inner.password)
        );
        let sm = self.inner.content.session_manager.clone();
        let (_, cookie) = self.send(method, &sm, &params, None).await?;
        let cookie = cookie.ok_or_else(|| Error::Protocol {
            method: method.into(),
            message: "no session cookie in the login answer".into(),
        })?;
        self.set_cookie(Some(cookie));
        Ok(())
    }

    /// Ends the session on the server. A later call on this client logs in again.
    pub async fn logout(&self) -> Result<()> {
        let sm = self.inner.content.session_manager.clone();
        let cookie = self.cookie();
        self.send("Logout", &sm, "", cookie.as_deref()).await?;
        self.set_cookie(None);
        Ok(())
    }

    /// The server's key of this client's session (what `TerminateSession` takes).
    pub async fn session_key(&self) -> Result<String> {
        let sm = self.inner.content.session_manager.clone();
        let found = self
            .properties(&[sm], "SessionManager", &["currentSession"])
            .await?;
        found
            .first()
            .and_then(|o| o.props.get("currentSession"))
            .and_then(|s| s.child_text("key"))
            .map(str::to_string)
            .ok_or_else(|| Error::Protocol {
                method: "RetrievePropertiesEx".into(),
                message: "no current session".into(),
            })
    }

    /// Ends another session (an administrator's call).
    pub async fn terminate_session(&self, key: &str) -> Result<()> {
        let sm = self.inner.content.session_manager.clone();
        let params = param("sessionId", key);
        self.call("TerminateSession", &sm, &params, |_| Ok(()))
            .await
    }

    /// One method call on `this`, decoded by `decode`; re-logs in and retries once when the
    /// session has gone.
    pub(crate) async fn call<T>(
        &self,
        method: &str,
        this: &MoRef,
        params: &str,
        decode: impl Fn(Element) -> Result<T>,
    ) -> Result<T> {
        let cookie = self.cookie();
        let first = self.send(method, this, params, cookie.as_deref()).await;
        let first = first.and_then(|(resp, _)| decode(resp));
        match first {
            Err(Error::Fault {
                kind: FaultKind::NotAuthenticated,
                ..
            }) => {
                tracing::info!(method, "vSphere session gone; logging in again");
                self.relogin(cookie).await?;
                let cookie = self.cookie();
                let (resp, _) = self.send(method, this, params, cookie.as_deref()).await?;
                decode(resp)
            }
            other => other,
        }
    }

    /// Logs in again unless another call already did since `stale` failed.
    async fn relogin(&self, stale: Option<String>) -> Result<()> {
        let _one_at_a_time = self.inner.relogin.lock().await;
        if self.cookie() != stale {
            return Ok(());
        }
        self.login().await
    }

    async fn send(
        &self,
        method: &str,
        this: &MoRef,
        params: &str,
        cookie: Option<&str>,
    ) -> Result<(Element, Option<String>)> {
        self.inner.counts.add(method);
        let body = soap::envelope(method, this, params);
        let reply = self.inner.transport.post(SOAP_ACTION, cookie, body).await?;
        let resp = soap::response(method, &reply.body).map_err(|e| match e {
            Error::Protocol { method, message } if !reply.status.is_success() => Error::Protocol {
                method,
                message: format!("HTTP {}: {message}", reply.status),
            },
            other => other,
        })?;
        Ok((resp, reply.session_cookie))
    }
}

fn service_content(resp: &Element) -> Result<ServiceContent> {
    let rv = resp.child("returnval");
    let get = |name: &str| {
        rv.and_then(|r| r.child(name))
            .and_then(MoRef::from_element)
            .ok_or_else(|| Error::Protocol {
                method: "RetrieveServiceContent".into(),
                message: format!("service content has no {name}"),
            })
    };
    Ok(ServiceContent {
        root_folder: get("rootFolder")?,
        property_collector: get("propertyCollector")?,
        search_index: get("searchIndex")?,
        session_manager: get("sessionManager")?,
        custom_fields_manager: rv
            .and_then(|r| r.child("customFieldsManager"))
            .and_then(MoRef::from_element),
        api_version: rv
            .and_then(|r| r.path(&["about", "apiVersion"]))
            .map(|v| v.text.clone())
            .unwrap_or_default(),
    })
}
