//! Every name and label a BookStore's children carry, derived from the BookStore.
//!
//! | child                      | name                                      |
//! |----------------------------|-------------------------------------------|
//! | app Deployment and Service | `<name>-app`                              |
//! | MongoDB StatefulSet        | `<name>-mongodb`                          |
//! | MongoDB headless Service   | `<name>-mongodb-headless`                 |
//! | MongoDB client Service     | `bookDB.serviceName` or `<name>-mongodb`  |
//! | data claims                | `data-<name>-mongodb-<ordinal>`           |
use std::collections::BTreeMap;

pub const MANAGED_BY: &str = "bosun";
pub const NAME_LABEL: &str = "app.kubernetes.io/name";
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// On volume claims: the UID of the BookStore whose StatefulSet created them.
pub const OWNER_UID_LABEL: &str = "bookstore.bosun.dev/owner-uid";
/// The claim template's name; claims are `data-<name>-mongodb-<ordinal>`.
pub const DATA_VOLUME: &str = "data";
/// The label selector of the claims the operator watches (every claim a BookStore's
/// StatefulSet creates carries these labels).
pub const CLAIM_SELECTOR: &str =
    "app.kubernetes.io/managed-by=bosun,app.kubernetes.io/name=bookstore";

/// The two parts of a BookStore, each with its own pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    App,
    MongoDb,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Component::App => "app",
            Component::MongoDb => "mongodb",
        }
    }
}

/// Every child's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Names {
    pub instance: String,
    pub app: String,
    pub db: String,
    pub db_headless: String,
    pub db_client: String,
}

impl Names {
    pub fn new(instance: &str, service_name: Option<&str>) -> Names {
        Names {
            instance: instance.to_string(),
            app: format!("{instance}-app"),
            db: format!("{instance}-mongodb"),
            db_headless: format!("{instance}-mongodb-headless"),
            db_client: service_name
                .map(str::to_string)
                .unwrap_or_else(|| format!("{instance}-mongodb")),
        }
    }

    /// The prefix of this BookStore's data claims (`data-<name>-mongodb-`).
    pub fn claim_prefix(&self) -> String {
        format!("{DATA_VOLUME}-{}-", self.db)
    }

    /// The data claim of one MongoDB replica.
    pub fn claim(&self, ordinal: i32) -> String {
        format!("{}{ordinal}", self.claim_prefix())
    }

    /// The pod of one MongoDB replica.
    pub fn db_pod(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.db)
    }

    /// The ordinal of a data claim of this BookStore, from its name.
    pub fn claim_ordinal(&self, claim: &str) -> Option<i32> {
        claim.strip_prefix(&self.claim_prefix())?.parse().ok()
    }

    /// Labels that select one component's pods (stable: used in immutable selectors).
    pub fn selector(&self, component: Component) -> BTreeMap<String, String> {
        BTreeMap::from([
            (NAME_LABEL.to_string(), "bookstore".to_string()),
            (INSTANCE_LABEL.to_string(), self.instance.clone()),
            (COMPONENT_LABEL.to_string(), component.as_str().to_string()),
        ])
    }

    /// Labels on every child.
    pub fn labels(&self, component: Component) -> BTreeMap<String, String> {
        let mut l = self.selector(component);
        l.insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
        l
    }
}

/// Label selector string for a map of labels.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_pods_by_ordinal() {
        let n = Names::new("shop", None);
        assert_eq!(n.claim_ordinal("data-shop-mongodb-2"), Some(2));
        assert_eq!(n.claim_ordinal("data-shop-mongodb-x"), None);
        assert_eq!(n.claim_ordinal("data-other-mongodb-0"), None);
        assert_eq!(n.db_pod(0), "shop-mongodb-0");
        assert_eq!(n.claim(1), "data-shop-mongodb-1");
        assert_eq!(
            Names::new("shop", Some("mongodb-service")).db_client,
            "mongodb-service"
        );
    }

    #[test]
    fn claim_selector_matches_claim_labels() {
        let n = Names::new("shop", None);
        let l = n.labels(Component::MongoDb);
        for pair in CLAIM_SELECTOR.split(',') {
            let (k, v) = pair.split_once('=').expect("k=v");
            assert_eq!(l.get(k).map(String::as_str), Some(v));
        }
    }
}
