//! MongoDB's two Services: the headless one that gives StatefulSet pods stable DNS names, and
//! the client Service the app connects to.
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::child_meta;
use crate::names::Component;
use crate::validate::Plan;

fn ports(plan: &Plan) -> Option<Vec<ServicePort>> {
    let port = plan.db.port;
    Some(vec![ServicePort {
        name: Some("mongodb".into()),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..Default::default()
    }])
}

// `type` and `sessionAffinity` are spelled out although they are the API server's defaults:
// the server records them as owned by the applier (Kubernetes 1.20), so the owned-field
// fingerprint of the live object carries them (see `bosun_runtime::owned`).
pub fn headless(plan: &Plan) -> Service {
    Service {
        metadata: child_meta(plan, &plan.id.names.db_headless, Component::MongoDb),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: Some("None".into()),
            selector: Some(plan.id.names.selector(Component::MongoDb)),
            ports: ports(plan),
            publish_not_ready_addresses: Some(true),
            session_affinity: Some("None".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn client(plan: &Plan) -> Service {
    Service {
        metadata: child_meta(plan, &plan.id.names.db_client, Component::MongoDb),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(plan.id.names.selector(Component::MongoDb)),
            ports: ports(plan),
            session_affinity: Some("None".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::fixtures::{plan, sample};

    #[test]
    fn headless_seed_sample() {
        insta::assert_yaml_snapshot!(headless(&plan(&sample())));
    }

    #[test]
    fn client_seed_sample() {
        insta::assert_yaml_snapshot!(client(&plan(&sample())));
    }

    #[test]
    fn client_name_can_be_chosen() {
        let mut bs = sample();
        bs.spec.book_db.service_name = Some("mongodb-service".into());
        assert_eq!(
            client(&plan(&bs)).metadata.name.as_deref(),
            Some("mongodb-service")
        );
    }
}
