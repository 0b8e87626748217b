//! The app Service: `port` → the container's `targetPort`, of the requested type.
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{child_meta, selector, Names};
use crate::api::BookStore;

pub fn build(bs: &BookStore) -> Service {
    let app = &bs.spec.book_app;
    Service {
        metadata: child_meta(bs, &Names::of(bs).app, "app"),
        spec: Some(ServiceSpec {
            type_: Some(format!("{:?}", app.service_type)),
            selector: Some(selector(bs, "app")),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: app.port,
                target_port: Some(IntOrString::Int(app.target_port)),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ServiceType;
    use crate::build::fixtures;

    #[test]
    fn seed_sample() {
        insta::assert_yaml_snapshot!(build(&fixtures::sample()));
    }

    #[test]
    fn node_port() {
        let mut bs = fixtures::sample();
        bs.spec.book_app.service_type = ServiceType::NodePort;
        bs.spec.book_app.port = 8080;
        let svc = build(&bs);
        let spec = svc.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        assert_eq!(spec.ports.expect("ports")[0].port, 8080);
    }
}
