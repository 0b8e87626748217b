//! Checks a spec must pass beyond the CRD schema, which cannot express them on Kubernetes
//! 1.20 (no CEL): sizes that parse and are usable, names that fit, names that do not collide.
use kube::ResourceExt;

use crate::api::BookStore;
use crate::build::Names;
use crate::error::Problem;
use crate::quantity;

/// What the rest of the pipeline needs from a valid spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub names: Names,
    pub db_bytes: u128,
}

/// MongoDB will not start on a smaller volume.
const MIN_DB_BYTES: u128 = 64 << 20;

pub fn validate(bs: &BookStore) -> Result<Plan, Problem> {
    let name = bs.name_any();
    // `<name>-mongodb-headless` must be a DNS-1035 label (≤ 63), and StatefulSet pod names
    // get a controller-revision-hash label of `<name>-mongodb-<10 chars>` (≤ 63).
    if name.len() > 42 {
        return Err(Problem::new(
            "NameTooLong",
            format!("BookStore names are limited to 42 characters so every child name fits; {name:?} has {}", name.len()),
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(Problem::new(
            "InvalidName",
            format!("Service names must start with a letter; {name:?} does not"),
        ));
    }
    let db = &bs.spec.book_db;
    let Some(db_bytes) = quantity::to_bytes(&db.db_size) else {
        return Err(Problem::new(
            "InvalidDbSize",
            format!("dbSize {:?} is not a storage quantity", db.db_size),
        ));
    };
    if db_bytes < MIN_DB_BYTES {
        return Err(Problem::new(
            "InvalidDbSize",
            format!("dbSize {} is below the 64Mi MongoDB needs", db.db_size),
        ));
    }
    let resources = [
        ("bookApp", &bs.spec.book_app.resources),
        ("bookDB", &bs.spec.book_db.resources),
    ];
    for (part, res) in resources {
        let Some(res) = res else { continue };
        for (kind, map) in [("limits", &res.limits), ("requests", &res.requests)] {
            for (key, value) in map.iter().flatten() {
                if let crate::api::Qty::Str(v) = value {
                    if !quantity::is_quantity(v) {
                        return Err(Problem::new(
                            "InvalidResources",
                            format!("{part}.resources.{kind}.{key} {v:?} is not a Kubernetes quantity (like 500m, 1, 256Mi)"),
                        ));
                    }
                }
            }
        }
    }
    let names = Names::of(bs);
    if names.db_client == names.app || names.db_client == names.db_headless {
        return Err(Problem::new(
            "InvalidServiceName",
            format!(
                "bookDB.serviceName {:?} collides with another Service of this BookStore",
                names.db_client
            ),
        ));
    }
    Ok(Plan { names, db_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures;

    #[test]
    fn seed_sample_is_valid() {
        let plan = validate(&fixtures::sample()).expect("valid");
        assert_eq!(plan.db_bytes, 2 << 30);
        assert_eq!(plan.names.db_client, "bookstore-sample-mongodb");
    }

    #[test]
    fn reports_unusable_specs_with_reasons() {
        let mut bs = fixtures::sample();
        bs.spec.book_db.db_size = "1Ki".into();
        assert_eq!(validate(&bs).map_err(|p| p.reason), Err("InvalidDbSize"));

        let mut bs = fixtures::sample();
        bs.spec.book_db.service_name = Some("bookstore-sample-app".into());
        assert_eq!(
            validate(&bs).map_err(|p| p.reason),
            Err("InvalidServiceName")
        );

        let mut bs = fixtures::sample();
        bs.metadata.name = Some("a".repeat(43));
        assert_eq!(validate(&bs).map_err(|p| p.reason), Err("NameTooLong"));

        let mut bs = fixtures::sample();
        bs.metadata.name = Some("9store".into());
        assert_eq!(validate(&bs).map_err(|p| p.reason), Err("InvalidName"));
    }
}
