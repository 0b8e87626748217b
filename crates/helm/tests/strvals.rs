//! `--set-string` parsing (what helm-operator does with a watches entry's `overrideValues`:
//! `key=value` through `strvals.ParseString`) against Helm's own: dotted and escaped keys,
//! list indexes, empty values, commas, `=` in values, text that looks like other types,
//! left-over `${ENV}` text, and malformed expressions with Helm's error messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use bosun_helm::render::strvals;
use bosun_helm::value::Data;

#[test]
fn set_string_matches_helm() {
    let exprs: Vec<String> = [
        "image.repository=registry.example/app",
        "a.b.c=v",
        "a=",
        "a.b=",
        "a=\"\"",
        "l[0]=x",
        "l[2]=x",
        "a.b[1].c=z",
        r"podAnnotations.prometheus\.io/scrape=true",
        r"a\.b.c=d",
        "a=x,y",
        "a=x\\,y",
        "a=1,b=2",
        "k=a=b",
        "a=1",
        "a=1.50",
        "a=null",
        "a=true",
        "a=0777",
        "a=${UNSET}",
        "a=$HOME",
        " sp = x ",
        "a.=x",
        ".a=x",
        "a",
        "=x",
        "a[=x",
        "a[x]=y",
        "a[-1]=y",
        "a[99999999]=y",
        "a..b=c",
        "a[0][1]=x",
        "name=héllo ☃",
        "multi=line1\nline2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let helm = common::oracle_set_string(&exprs);
    let mut report = Vec::new();
    for (e, h) in exprs.iter().zip(helm) {
        let mut b = Data::Map(Default::default());
        let b = strvals::parse_into(e, &mut b, true).map(|()| b);
        if h != b {
            report.push(format!("{e:?}\n  helm:  {h:?}\n  bosun: {b:?}"));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
