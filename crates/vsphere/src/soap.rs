//! SOAP 1.1 envelopes for vim25: building a request body, reading a response or a fault.
use crate::error::{Error, FaultKind, Result};
use crate::types::MoRef;
use crate::xml::{self, esc, Element, SOAP_ENV, VIM25, XSI};

/// Wraps a method's parameters (already XML) addressed to `this`.
pub fn envelope(method: &str, this: &MoRef, params: &str) -> String {
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<soapenv:Envelope xmlns:soapenv="{env}" xmlns:xsi="{xsi}" xmlns:xsd="http://www.w3.org/2001/XMLSchema">"#,
            r#"<soapenv:Body><{m} xmlns="{vim}">{this}{p}</{m}></soapenv:Body></soapenv:Envelope>"#
        ),
        env = SOAP_ENV,
        xsi = XSI,
        vim = VIM25,
        m = method,
        this = this.to_xml("_this"),
        p = params,
    )
}

/// A simple text parameter.
pub fn param(name: &str, value: &str) -> String {
    format!("<{name}>{}</{name}>", esc(value))
}

/// The method's response element (`<MethodResponse>`), or the fault it carries.
pub fn response(method: &str, doc: &str) -> Result<Element> {
    let protocol = |message: String| Error::Protocol {
        method: method.to_string(),
        message,
    };
    let root = xml::parse(doc).map_err(|e| protocol(format!("malformed XML: {e}")))?;
    if !root.is(SOAP_ENV, "Envelope") {
        return Err(protocol(format!(
            "root element is {}, not a SOAP envelope",
            root.name
        )));
    }
    let body = root
        .children
        .iter()
        .find(|c| c.is(SOAP_ENV, "Body"))
        .ok_or_else(|| protocol("no SOAP body".into()))?;
    let first = body
        .children
        .first()
        .ok_or_else(|| protocol("empty SOAP body".into()))?;
    if first.is(SOAP_ENV, "Fault") {
        return Err(fault(method, first));
    }
    let expected = format!("{method}Response");
    if !first.is(VIM25, &expected) {
        return Err(protocol(format!(
            "got {} instead of {expected}",
            first.name
        )));
    }
    Ok(first.clone())
}

/// A SOAP fault: its type from the detail element, its message from `faultstring`.
fn fault(method: &str, f: &Element) -> Error {
    let unqualified = |name: &str| {
        f.children
            .iter()
            .find(|c| c.ns.is_empty() && c.name == name)
    };
    let message = unqualified("faultstring")
        .map(|s| s.text.trim().to_string())
        .unwrap_or_default();
    let detail = unqualified("detail").and_then(|d| d.children.first());
    let type_name = detail.map(fault_type).unwrap_or_default();
    fault_error(method, &type_name, with_details(message, detail))
}

/// Adds the fault's telling fields (the object, name, file or property it is about) to a
/// message that does not already say them: vcsim and vCenter often send an empty one.
pub fn with_details(message: String, fault: Option<&Element>) -> String {
    let Some(fault) = fault else { return message };
    let mut out = message;
    let fields = [
        "obj",
        "name",
        "file",
        "invalidProperty",
        "path",
        "existingState",
        "requestedState",
    ];
    for field in fields {
        let Some(value) = fault.child_text(field).map(str::trim) else {
            continue;
        };
        if value.is_empty() || out.contains(value) {
            continue;
        }
        let sep = if out.is_empty() { "" } else { "; " };
        out = format!("{out}{sep}{field} {value}");
    }
    out
}

/// The vim25 type of a fault element: its `xsi:type`, else its name less `Fault`.
pub fn fault_type(e: &Element) -> String {
    e.xsi_type
        .clone()
        .unwrap_or_else(|| e.name.strip_suffix("Fault").unwrap_or(&e.name).to_string())
}

pub fn fault_error(method: &str, type_name: &str, message: String) -> Error {
    let kind = FaultKind::from_type(type_name);
    let message = if message.is_empty() {
        type_name.to_string()
    } else if message.contains(type_name) {
        message
    } else {
        format!("{type_name}: {message}")
    };
    Error::Fault {
        kind,
        method: method.to_string(),
        message,
    }
}

/// A response's `returnval` as a managed object reference.
pub fn returned_ref(method: &str, resp: &Element) -> Result<MoRef> {
    resp.child("returnval")
        .and_then(MoRef::from_element)
        .ok_or_else(|| Error::Protocol {
            method: method.to_string(),
            message: "no managed object reference in returnval".into(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_keeps_its_type_and_message() {
        let doc = r#"<?xml version="1.0"?><s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/">
          <s:Body><s:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Login failure</faultstring>
          <detail><InvalidLoginFault xmlns="urn:vim25" xmlns:x="http://www.w3.org/2001/XMLSchema-instance"
            x:type="InvalidLogin"></InvalidLoginFault></detail></s:Fault></s:Body></s:Envelope>"#;
        match response("Login", doc) {
            Err(Error::Fault { kind, message, .. }) => {
                assert_eq!(kind, FaultKind::InvalidLogin);
                assert_eq!(message, "InvalidLogin: Login failure");
            }
            other => panic!("expected a fault, got {other:?}"),
        }
    }

    #[test]
    fn an_empty_fault_message_names_the_object() {
        let doc = r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><s:Fault>
          <faultcode>ServerFaultCode</faultcode><faultstring></faultstring><detail>
          <ManagedObjectNotFoundFault xmlns="urn:vim25"><obj type="VirtualMachine">vm-9</obj>
          </ManagedObjectNotFoundFault></detail></s:Fault></s:Body></s:Envelope>"#;
        let err = response("Destroy_Task", doc).expect_err("a fault");
        assert_eq!(err.fault_kind(), Some(&FaultKind::NotFound));
        assert!(
            err.to_string().contains("ManagedObjectNotFound: obj vm-9"),
            "{err}"
        );
    }

    #[test]
    fn a_response_of_another_method_is_a_protocol_error() {
        let doc = r#"<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>
          <LogoutResponse xmlns="urn:vim25"/></s:Body></s:Envelope>"#;
        assert!(matches!(
            response("Login", doc),
            Err(Error::Protocol { .. })
        ));
        assert!(response("Logout", doc).is_ok());
    }

    #[test]
    fn parameters_are_escaped() {
        assert_eq!(param("name", "a<b&c"), "<name>a&lt;b&amp;c</name>");
    }
}
