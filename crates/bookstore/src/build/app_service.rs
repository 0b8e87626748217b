//! The app Service: `port` → the container's `targetPort`, of the requested type.
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::child_meta;
use crate::api::ServiceType;
use crate::names::Component;
use crate::validate::Plan;

/// `sessionAffinity` (and `externalTrafficPolicy` for node ports) are the API server's
/// defaults, spelled out because the server records them as owned by the applier (see
/// `db_services`).
pub fn build(plan: &Plan) -> Service {
    let app = &plan.app;
    Service {
        metadata: child_meta(plan, &plan.id.names.app, Component::App),
        spec: Some(ServiceSpec {
            type_: Some(app.service_type.as_str().into()),
            selector: Some(plan.id.names.selector(Component::App)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: app.port,
                target_port: Some(IntOrString::Int(app.target_port)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            session_affinity: Some("None".into()),
            external_traffic_policy: (app.service_type != ServiceType::ClusterIP)
                .then(|| "Cluster".into()),
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
    fn seed_sample() {
        insta::assert_yaml_snapshot!(build(&plan(&sample())));
    }

    #[test]
    fn node_port() {
        let mut bs = sample();
        bs.spec.book_app.service_type = ServiceType::NodePort;
        bs.spec.book_app.port = 8080;
        let svc = build(&plan(&bs));
        let spec = svc.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        assert_eq!(spec.ports.expect("ports")[0].port, 8080);
    }
}
