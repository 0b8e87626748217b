//! Names a user types (`--domain`, `--group`, `--version`, `--kind`, `--project-name`) checked
//! as Kubernetes and operator-sdk check them, and the names derived from them.
use crate::Error;

fn bad(what: &str, value: &str, rule: &str) -> Error {
    Error::BadName {
        what: what.to_string(),
        value: value.to_string(),
        rule: rule.to_string(),
    }
}

fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain: dot-separated labels, lowercase, at most 253 characters.
pub fn check_subdomain(what: &str, s: &str) -> Result<(), Error> {
    if s.len() <= 253 && s.split('.').all(is_label) {
        Ok(())
    } else {
        Err(bad(
            what,
            s,
            "lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit (a DNS-1123 subdomain such as example.com)",
        ))
    }
}

/// A project name: a DNS-1123 label (it prefixes every object's name and the namespace).
pub fn check_project_name(s: &str) -> Result<(), Error> {
    if is_label(s) {
        Ok(())
    } else {
        Err(bad(
            "project name",
            s,
            "lowercase letters, digits and '-', at most 63, starting and ending with a letter or digit; pass --project-name",
        ))
    }
}

/// `v1`, `v1alpha1`, `v2beta3`: a Kubernetes API version.
pub fn check_version(s: &str) -> Result<(), Error> {
    let rule =
        "v<number>, optionally followed by alpha<number> or beta<number> (v1, v1alpha1, v2beta3)";
    let Some(rest) = s.strip_prefix('v') else {
        return Err(bad("version", s, rule));
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    let tail_ok = tail.is_empty()
        || ["alpha", "beta"].iter().any(|p| {
            tail.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
        });
    if digits > 0 && !rest.starts_with('0') && tail_ok {
        Ok(())
    } else {
        Err(bad("version", s, rule))
    }
}

/// A kind: UpperCamelCase letters and digits, whose lowercase form is a DNS-1035 label.
pub fn check_kind(s: &str) -> Result<(), Error> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_uppercase()
        && b.iter().all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(bad(
            "kind",
            s,
            "UpperCamelCase: an uppercase letter, then letters and digits, at most 63 (for example BookStore)",
        ))
    }
}

/// A chart name in UpperCamel, as operator-sdk's `strcase.ToCamel`: `book-store` →
/// `BookStore`, `my_app2go` → `MyApp2Go`.
pub fn upper_camel(name: &str) -> String {
    let mut out = String::new();
    let mut cap = true;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            if cap {
                out.extend(c.to_uppercase());
            } else {
                out.push(c);
            }
            cap = c.is_ascii_digit();
        } else {
            cap = true;
        }
    }
    out
}

pub use bosun_watches::kinds::plural;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_names_become_kinds_as_operator_sdk_makes_them() {
        assert_eq!(upper_camel("book-store"), "BookStore");
        assert_eq!(upper_camel("nginx"), "Nginx");
        assert_eq!(upper_camel("my_app2go"), "MyApp2Go");
        assert_eq!(upper_camel("a.b c"), "ABC");
    }

    #[test]
    fn kubernetes_name_rules() {
        for ok in ["v1", "v1alpha1", "v2beta3", "v10"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in ["1", "v", "v0", "v01", "v1alpha", "v1gamma1", "V1"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
        assert!(check_kind("BookStore").is_ok());
        for bad in ["bookStore", "Book-Store", "", "Book_Store"] {
            assert!(check_kind(bad).is_err(), "{bad}");
        }
        assert!(check_subdomain("group", "charts.example.com").is_ok());
        for bad in ["Charts", "-a", "a..b", "a_b", "a."] {
            assert!(check_subdomain("group", bad).is_err(), "{bad}");
        }
        assert!(check_project_name("book-store-operator").is_ok());
        assert!(check_project_name("Book").is_err());
    }
}
