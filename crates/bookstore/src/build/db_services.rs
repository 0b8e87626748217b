//! MongoDB's two Services: the headless one that gives StatefulSet pods stable DNS names, and
//! the client Service the app connects to.
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{child_meta, selector, Names};
use crate::api::BookStore;

fn ports(bs: &BookStore) -> Option<Vec<ServicePort>> {
    let port = bs.spec.book_db.port;
    Some(vec![ServicePort {
        name: Some("mongodb".into()),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }])
}

pub fn headless(bs: &BookStore) -> Service {
    Service {
        metadata: child_meta(bs, &Names::of(bs).db_headless, "mongodb"),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(selector(bs, "mongodb")),
            ports: ports(bs),
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn client(bs: &BookStore) -> Service {
    Service {
        metadata: child_meta(bs, &Names::of(bs).db_client, "mongodb"),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector(bs, "mongodb")),
            ports: ports(bs),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures;

    #[test]
    fn headless_seed_sample() {
        insta::assert_yaml_snapshot!(headless(&fixtures::sample()));
    }

    #[test]
    fn client_seed_sample() {
        insta::assert_yaml_snapshot!(client(&fixtures::sample()));
    }

    #[test]
    fn client_name_can_be_chosen() {
        let mut bs = fixtures::sample();
        bs.spec.book_db.service_name = Some("mongodb-service".into());
        assert_eq!(
            client(&bs).metadata.name.as_deref(),
            Some("mongodb-service")
        );
    }
}
