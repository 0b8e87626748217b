//! A namespace-resolved element tree of a SOAP response, and escaping for requests.
//!
//! Responses are small (a task, a service content, a page of properties), so they are read
//! whole into a tree: each element's name is its (namespace URI, local name) pair, whatever
//! prefix the server chose, and `xsi:type` values are resolved the same way.
use quick_xml::events::Event;
use quick_xml::name::{QName, ResolveResult};
use quick_xml::reader::NsReader;
use quick_xml::XmlVersion;

pub const SOAP_ENV: &str = "http://schemas.xmlsoap.org/soap/envelope/";
pub const VIM25: &str = "urn:vim25";
pub const XSI: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// One element: namespace-resolved name, `type` attribute, `xsi:type`, text and children.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Element {
    pub ns: String,
    pub name: String,
    /// The unqualified `type` attribute (a managed object reference's type).
    pub type_attr: Option<String>,
    /// The local name of the `xsi:type` attribute's value (a vim25 data object's type).
    pub xsi_type: Option<String>,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    pub fn is(&self, ns: &str, name: &str) -> bool {
        self.ns == ns && self.name == name
    }

    /// The first child named `name` in the vim25 namespace.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.is(VIM25, name))
    }

    /// Every child named `name` in the vim25 namespace.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.is(VIM25, name))
    }

    /// Follows a path of vim25 child names.
    pub fn path(&self, names: &[&str]) -> Option<&Element> {
        names.iter().try_fold(self, |e, n| e.child(n))
    }

    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }
}

fn ns_of(r: &ResolveResult<'_>) -> String {
    match r {
        ResolveResult::Bound(ns) => ns.into_inner().to_string(),
        _ => String::new(),
    }
}

/// Parses a whole document into its root element.
pub fn parse(doc: &str) -> Result<Element, String> {
    let mut reader = NsReader::from_str(doc);
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let (resolved, event) = reader.read_resolved_event().map_err(|e| e.to_string())?;
        let ns = ns_of(&resolved);
        match event {
            Event::Start(ref start) | Event::Empty(ref start) => {
                let mut el = Element {
                    ns,
                    name: start.local_name().into_inner().to_string(),
                    ..Element::default()
                };
                for attr in start.attributes().flatten() {
                    let (attr_ns, local) = reader.resolver().resolve_attribute(attr.key);
                    let attr_ns = ns_of(&attr_ns);
                    let value = attr
                        .normalized_value(XmlVersion::Implicit1_0)
                        .map_err(|e| e.to_string())?;
                    if attr_ns.is_empty() && local.into_inner() == "type" {
                        el.type_attr = Some(value.into_owned());
                    } else if attr_ns == XSI && local.into_inner() == "type" {
                        let (_, type_local) = reader.resolver().resolve_element(QName(&value));
                        el.xsi_type = Some(type_local.into_inner().to_string());
                    }
                }
                if matches!(event, Event::Empty(_)) {
                    attach(&mut stack, &mut root, el);
                } else {
                    stack.push(el);
                }
            }
            Event::End(_) => {
                let el = stack.pop().ok_or("unbalanced end tag")?;
                attach(&mut stack, &mut root, el);
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml_content(XmlVersion::Implicit1_0));
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml_content(XmlVersion::Implicit1_0));
                }
            }
            Event::GeneralRef(r) => {
                let name = r.xml_content(XmlVersion::Implicit1_0);
                let resolved = match r.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(&name)
                        .ok_or_else(|| format!("unknown entity &{name};"))?
                        .to_string(),
                };
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&resolved);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err("document ends inside an element".into());
    }
    root.ok_or_else(|| "empty document".into())
}

fn attach(stack: &mut [Element], root: &mut Option<Element>, el: Element) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(el),
        None => *root = Some(el),
    }
}

/// Escapes text for an element's content or an attribute value.
pub fn esc(s: &str) -> std::borrow::Cow<'_, str> {
    quick_xml::escape::escape(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_matched_by_namespace_not_prefix() {
        let doc = r#"<a:Envelope xmlns:a="http://schemas.xmlsoap.org/soap/envelope/"
            xmlns:v="urn:vim25" xmlns:i="http://www.w3.org/2001/XMLSchema-instance">
            <a:Body><v:R><v:returnval i:type="v:ManagedObjectReference" type="Folder">group-&amp;1</v:returnval>
            <other:returnval xmlns:other="urn:elsewhere">x</other:returnval></v:R></a:Body></a:Envelope>"#;
        let root = parse(doc).expect("parses");
        assert!(root.is(SOAP_ENV, "Envelope"));
        let body = &root.children[0];
        assert!(body.is(SOAP_ENV, "Body"));
        let r = &body.children[0];
        assert_eq!(
            r.all("returnval").count(),
            1,
            "the foreign namespace is not vim25"
        );
        let rv = r.child("returnval").expect("returnval");
        assert_eq!(rv.text, "group-&1");
        assert_eq!(rv.type_attr.as_deref(), Some("Folder"));
        assert_eq!(rv.xsi_type.as_deref(), Some("ManagedObjectReference"));
    }

    #[test]
    fn default_namespace_counts_and_a_wrong_one_does_not() {
        let root = parse(r#"<R xmlns="urn:vim25"><x>1</x></R>"#).expect("parses");
        assert_eq!(root.child_text("x"), Some("1"));
        let root = parse(r#"<R xmlns="urn:vim26"><x>1</x></R>"#).expect("parses");
        assert_eq!(root.child("x"), None);
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(parse("<a><b></a>").is_err());
        assert!(parse("").is_err());
        assert!(parse("<a>").is_err());
    }
}
