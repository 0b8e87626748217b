//! A BookStore in, the [`Plan`] out: every check the CRD schema cannot express on Kubernetes
//! 1.20 (no CEL) — names that fit and are valid for every child, sizes that parse and are
//! usable, Services that do not collide — and every value the pipeline needs, parsed once.
//! The builders, the volume code and the status read the plan, never the raw spec.
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};

use crate::api::{BookStore, DataPolicy, PullPolicy, Resources, ServiceType};
use crate::error::Problem;
use crate::names::Names;
use crate::quantity;
use crate::reason::Reason;

/// Which BookStore, and the names of its children: known even when the spec is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub namespace: String,
    pub uid: String,
    pub generation: Option<i64>,
    pub names: Names,
}

impl Identity {
    pub fn of(bs: &BookStore) -> Identity {
        Identity {
            namespace: bs.namespace().unwrap_or_default(),
            uid: bs.uid().unwrap_or_default(),
            generation: bs.metadata.generation,
            names: Names::new(&bs.name_any(), bs.spec.book_db.service_name.as_deref()),
        }
    }
}

/// Everything the pipeline needs from a valid BookStore.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub id: Identity,
    /// The controller owner reference every child carries.
    pub owner: OwnerReference,
    pub app: AppPlan,
    pub db: DbPlan,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AppPlan {
    pub image: String,
    pub pull_policy: PullPolicy,
    pub replicas: i32,
    pub port: i32,
    pub target_port: i32,
    pub service_type: ServiceType,
    pub resources: Option<ResourceRequirements>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DbPlan {
    pub image: String,
    pub pull_policy: PullPolicy,
    pub replicas: i32,
    pub port: i32,
    pub size: Size,
    /// None: the cluster's default class.
    pub storage_class: Option<String>,
    pub data_policy: DataPolicy,
    pub adopt_claims: bool,
    pub resources: Option<ResourceRequirements>,
}

/// A volume size: as the API server spells it (what claims request) and in bytes (what is
/// compared).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Size {
    pub text: String,
    pub bytes: u128,
}

/// MongoDB will not start on a smaller volume.
const MIN_DB_BYTES: u128 = 64 << 20;

/// `<name>-mongodb-headless` must be a DNS-1035 label (≤ 63), and StatefulSet pod names get a
/// controller-revision-hash label of `<name>-mongodb-<10 chars>` (≤ 63).
pub const MAX_NAME: usize = 42;

/// A DNS-1035 label: what a Service name must be (lower-case letters, digits and `-`,
/// starting with a letter, ending with a letter or digit).
fn is_dns1035_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

pub fn validate(bs: &BookStore) -> Result<Plan, Problem> {
    let name = bs.name_any();
    // Checked for every child before anything is written: a name valid for a Deployment
    // (a DNS subdomain, with dots) but not for a Service would leave a half-built BookStore.
    if name.len() > MAX_NAME {
        return Err(Problem::new(
            Reason::NameTooLong,
            format!("BookStore names are limited to {MAX_NAME} characters so every child name fits; {name:?} has {}", name.len()),
        ));
    }
    if !is_dns1035_label(&name) {
        return Err(Problem::new(
            Reason::InvalidName,
            format!("{name:?} cannot name this BookStore's Services: use lower-case letters, digits and '-', starting with a letter (no dots)"),
        ));
    }
    let spec = &bs.spec;
    let db = &spec.book_db;
    let size = db_size(&db.db_size)?;
    let app_resources = resources("bookApp", spec.book_app.resources.as_ref())?;
    let db_resources = resources("bookDB", db.resources.as_ref())?;
    let id = Identity::of(bs);
    let names = &id.names;
    if names.db_client == names.app || names.db_client == names.db_headless {
        return Err(Problem::new(
            Reason::InvalidServiceName,
            format!(
                "bookDB.serviceName {:?} collides with another Service of this BookStore",
                names.db_client
            ),
        ));
    }
    let owner = bs.controller_owner_ref(&()).ok_or_else(|| {
        Problem::new(
            Reason::InvalidName,
            "the BookStore has no name or UID yet; it cannot own children",
        )
    })?;
    Ok(Plan {
        id,
        owner,
        app: AppPlan {
            image: image(&spec.book_app.repository, &spec.book_app.tag),
            pull_policy: spec.book_app.image_pull_policy,
            replicas: spec.book_app.replicas,
            port: spec.book_app.port,
            target_port: spec.book_app.target_port,
            service_type: spec.book_app.service_type,
            resources: app_resources,
        },
        db: DbPlan {
            image: image(&db.repository, &db.tag),
            pull_policy: db.image_pull_policy,
            replicas: db.replicas,
            port: db.port,
            size,
            storage_class: db.storage_class_name.clone(),
            data_policy: db.data_policy,
            adopt_claims: db.adopt_claims,
            resources: db_resources,
        },
    })
}

fn image(repository: &str, tag: &str) -> String {
    format!("{repository}:{tag}")
}

fn db_size(text: &str) -> Result<Size, Problem> {
    let Some(bytes) = quantity::to_bytes(text) else {
        return Err(Problem::new(
            Reason::InvalidDbSize,
            format!("dbSize {text:?} is not a storage quantity"),
        ));
    };
    if bytes < MIN_DB_BYTES {
        return Err(Problem::new(
            Reason::InvalidDbSize,
            format!("dbSize {text} is below the 64Mi MongoDB needs"),
        ));
    }
    // Quantities are built in the server's spelling, so what the children hold after a
    // write is exactly what they were built with: no write after a restart.
    Ok(Size {
        text: quantity::canonical(text).unwrap_or_else(|| text.to_string()),
        bytes,
    })
}

fn resources(part: &str, res: Option<&Resources>) -> Result<Option<ResourceRequirements>, Problem> {
    let Some(res) = res else { return Ok(None) };
    for (kind, map) in [("limits", &res.limits), ("requests", &res.requests)] {
        for (key, value) in map.iter().flatten() {
            if let crate::api::Qty::Str(v) = value {
                if !quantity::is_quantity(v) {
                    return Err(Problem::new(
                        Reason::InvalidResources,
                        format!("{part}.resources.{kind}.{key} {v:?} is not a Kubernetes quantity (like 500m, 1, 256Mi)"),
                    ));
                }
            }
        }
    }
    let mut req = res.to_requirements();
    for map in [req.limits.as_mut(), req.requests.as_mut()]
        .into_iter()
        .flatten()
    {
        for q in map.values_mut() {
            if let Some(c) = quantity::canonical(&q.0) {
                q.0 = c;
            }
        }
    }
    Ok(Some(req))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures;

    #[test]
    fn seed_sample_is_valid() {
        let plan = validate(&fixtures::sample()).expect("valid");
        assert_eq!(plan.db.size.bytes, 2 << 30);
        assert_eq!(plan.db.size.text, "2Gi");
        assert_eq!(plan.id.names.db_client, "bookstore-sample-mongodb");
        assert_eq!(plan.app.image, "akash125/pyapp:latest");
        assert_eq!(plan.owner.kind, "BookStore");
        assert_eq!(plan.owner.controller, Some(true));
    }

    #[test]
    fn reports_unusable_specs_with_reasons() {
        let reason = |f: &dyn Fn(&mut BookStore)| {
            let mut bs = fixtures::sample();
            f(&mut bs);
            validate(&bs).map(|_| ()).map_err(|p| p.reason)
        };
        assert_eq!(
            reason(&|bs| bs.spec.book_db.db_size = "1Ki".into()),
            Err(Reason::InvalidDbSize)
        );
        assert_eq!(
            reason(&|bs| bs.spec.book_db.db_size = "lots".into()),
            Err(Reason::InvalidDbSize)
        );
        assert_eq!(
            reason(&|bs| bs.spec.book_db.service_name = Some("bookstore-sample-app".into())),
            Err(Reason::InvalidServiceName)
        );
        assert_eq!(
            reason(&|bs| bs.metadata.name = Some("a".repeat(43))),
            Err(Reason::NameTooLong)
        );
        assert_eq!(
            reason(&|bs| bs.metadata.name = Some("9store".into())),
            Err(Reason::InvalidName)
        );
        // Valid for a Deployment, not for a Service: refused before any child is written.
        assert_eq!(
            reason(&|bs| bs.metadata.name = Some("shop.v2".into())),
            Err(Reason::InvalidName)
        );
        assert_eq!(
            reason(&|bs| bs.metadata.name = Some("shop-".into())),
            Err(Reason::InvalidName)
        );
        assert_eq!(
            reason(&|bs| bs.metadata.uid = None),
            Err(Reason::InvalidName)
        );
        assert_eq!(reason(&|bs| bs.spec.book_db.db_size = "1E".into()), Ok(()));
    }

    #[test]
    fn quantities_take_the_api_servers_spelling() {
        let mut bs = fixtures::sample();
        bs.spec.book_db.db_size = "1024Mi".into();
        bs.spec.book_app.resources = Some(crate::api::Resources {
            requests: Some([("cpu".to_string(), crate::api::Qty::Str("0.1".into()))].into()),
            limits: Some([("memory".to_string(), crate::api::Qty::Str("0.125Gi".into()))].into()),
        });
        let plan = validate(&bs).expect("valid");
        assert_eq!(plan.db.size.text, "1Gi");
        let res = plan.app.resources.expect("resources");
        assert_eq!(res.requests.expect("requests")["cpu"].0, "100m");
        assert_eq!(res.limits.expect("limits")["memory"].0, "128Mi");
    }
}
