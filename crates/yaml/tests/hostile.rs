//! Hostile input ends in an error (or a bounded result), never in a stack overflow, hang or
//! abort. Each test runs on the test harness's small thread stack on purpose.

use bosun_yaml::goyaml::{json_to_yaml, yaml_to_json};
use bosun_yaml::{load_all, Schema};

const SCHEMAS: [Schema; 1] = [Schema::GoYamlV2];

fn assert_limit(src: &str, what: &str) {
    for schema in SCHEMAS {
        match load_all(src, schema) {
            Err(e) => assert!(
                e.message().contains("depth") || e.message().contains("aliasing"),
                "{what} ({schema:?}): unexpected error {e}"
            ),
            Ok(_) => panic!("{what} ({schema:?}): accepted"),
        }
    }
}

#[test]
fn deep_flow_nesting_is_refused() {
    let src = "[".repeat(100_000);
    assert_limit(&src, "100k '['");
    let src = "{a: ".repeat(100_000);
    assert_limit(&src, "100k '{a: '");
    assert!(yaml_to_json(&"[".repeat(100_000)).is_err());
    assert!(json_to_yaml(&"[".repeat(100_000)).is_err());
}

#[test]
fn deep_block_nesting_is_refused() {
    let src = format!("{}x\n", "- ".repeat(100_000));
    assert_limit(&src, "100k '- '");
    let mut nested = String::new();
    for i in 0..3000 {
        nested.push_str(&" ".repeat(i));
        nested.push_str("k:\n");
    }
    assert_limit(&nested, "3000 nested mappings");
}

#[test]
fn nesting_within_the_limit_is_read() {
    let depth = bosun_yaml::MAX_DEPTH - 1;
    let src = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    for schema in SCHEMAS {
        assert!(load_all(&src, schema).is_ok(), "{schema:?}");
    }
    let json = yaml_to_json(&src).expect("within the limit");
    assert_eq!(json.len(), 2 * depth);
}

/// The "billion laughs": nine levels of ten aliases each.
#[test]
fn alias_bomb_is_refused() {
    let mut src = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for pair in names.windows(2) {
        let refs = vec![format!("*{}", pair[0]); 9].join(",");
        src.push_str(&format!("{}: &{} [{}]\n", pair[1], pair[1], refs));
    }
    assert_limit(&src, "billion laughs");
    let err = yaml_to_json(&src).expect_err("refused");
    assert_eq!(err.message(), "yaml: document contains excessive aliasing");
}

#[test]
fn alias_cycles_and_deep_alias_chains_are_refused() {
    for schema in SCHEMAS {
        assert!(load_all("a: &a [*a]\n", schema).is_err(), "{schema:?}");
    }
    assert_eq!(
        yaml_to_json("a: &a [*a]\n").expect_err("cycle").message(),
        "yaml: anchor 'a' value contains itself"
    );
    // Each alias nests the previous anchor one level deeper: depth grows through aliases.
    let mut src = String::from("x0: &x0 [0]\n");
    for i in 1..1100 {
        src.push_str(&format!("x{i}: &x{i} [*x{}]\n", i - 1));
    }
    assert_limit(&src, "alias chain deeper than the limit");
}

#[test]
fn huge_scalars_are_read() {
    let big = "x".repeat(10_000_000);
    let src = format!("k: {big}\n");
    for schema in SCHEMAS {
        let docs = load_all(&src, schema).expect("a long plain scalar is fine");
        assert_eq!(
            docs[0]
                .value
                .get("k")
                .and_then(|n| n.value.as_str())
                .map(str::len),
            Some(big.len())
        );
    }
    let json = format!("{{\"k\":\"{big}\"}}");
    let yaml = json_to_yaml(&json).expect("a long string is fine");
    assert_eq!(yaml.len(), big.len() + 4);
    // A key longer than 1024 characters cannot be a simple key.
    let src = format!("{}: v\n", "k".repeat(2000));
    for schema in SCHEMAS {
        assert!(load_all(&src, schema).is_err(), "{schema:?}");
    }
}

#[test]
fn many_keys_and_items_stay_linear() {
    let mut src = String::new();
    for i in 0..200_000 {
        src.push_str(&format!("k{i}: {i}\n"));
    }
    for schema in SCHEMAS {
        let docs = load_all(&src, schema).expect("a wide mapping");
        assert!(matches!(&docs[0].value, bosun_yaml::Yaml::Map(p) if p.len() == 200_000));
    }
    let flow = format!("[{}]", vec!["1"; 300_000].join(","));
    assert!(yaml_to_json(&flow).is_ok());
}
