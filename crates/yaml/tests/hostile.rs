//! Hostile input ends in an error (or a bounded result), never in a stack overflow, hang or
//! abort. Each test runs on the test harness's small thread stack on purpose.

use bosun_yaml::goyaml::{json_to_yaml, yaml_to_json};
use bosun_yaml::{load_all, Schema};

const SCHEMAS: [Schema; 2] = [Schema::GoYamlV2, Schema::PyYaml];

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

/// Writers walk trees with explicit stacks: a tree built in code far deeper than anything a
/// reader accepts still writes (and fails cleanly where the format cannot carry it). YAML's
/// indentation makes block output quadratic in depth, so those get a smaller tree.
#[test]
fn writers_handle_trees_of_any_depth() {
    use bosun_yaml::{goyaml, pyyaml};
    let tree = deep_tree(100_000);
    let json = goyaml::to_json(&tree).expect("JSON of a deep tree");
    assert_eq!(json.matches('[').count(), 50_000);
    // Reading such output back is refused by depth, not by a crash.
    assert!(goyaml::yaml_to_json(&json).is_err());
    dismantle(tree);
    let tree = deep_tree(3000);
    assert!(goyaml::marshal(&tree).len() > 3000);
    assert!(pyyaml::dump(&tree, &pyyaml::DumpOptions::to_nice_yaml()).len() > 3000);
    dismantle(tree);
}

fn deep_tree(depth: usize) -> bosun_yaml::Yaml {
    use bosun_yaml::{Node, Yaml};
    let mut tree = Yaml::Str("x".into());
    for i in 0..depth {
        tree = if i % 2 == 0 {
            Yaml::Seq(vec![Node::new(tree)])
        } else {
            Yaml::Map(vec![(Node::new(Yaml::Str("k".into())), Node::new(tree))])
        };
    }
    tree
}

/// Drops a deep tree without recursion (Rust's own drop of nested vectors recurses).
fn dismantle(tree: bosun_yaml::Yaml) {
    use bosun_yaml::Yaml;
    let mut stack = vec![tree];
    while let Some(v) = stack.pop() {
        match v {
            Yaml::Seq(items) => stack.extend(items.into_iter().map(|n| n.value)),
            Yaml::Map(pairs) => {
                for (k, v) in pairs {
                    stack.push(k.value);
                    stack.push(v.value);
                }
            }
            _ => {}
        }
    }
}

/// Random text over YAML's syntax characters: every entry point returns, never panics.
#[test]
fn random_text_never_panics() {
    use bosun_yaml::{goyaml, pyyaml};
    const ALPHABET: &[&str] = &[
        " ",
        "  ",
        "\n",
        "\r\n",
        "\t",
        "-",
        "- ",
        "?",
        "? ",
        ":",
        ": ",
        ",",
        "[",
        "]",
        "{",
        "}",
        "#",
        "&a",
        "*a",
        "!",
        "!!str",
        "!<x>",
        "|",
        "|+",
        ">-",
        "|2",
        "'",
        "\"",
        "%YAML 1.1",
        "%TAG ! x",
        "@",
        "`",
        "---",
        "...",
        "a",
        "b1",
        "yes",
        "~",
        "0x1F",
        "1e3",
        "<<",
        "=",
        "\\",
        "\\x41",
        "\\u00e9",
        "é",
        "😀",
        "\u{feff}",
        "\u{85}",
        "\u{2028}",
        "\u{1}",
        "0",
    ];
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let len = (next() % 40) as usize;
        let text: String = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        for schema in SCHEMAS {
            if let Ok(docs) = load_all(&text, schema) {
                for d in docs {
                    let _ = goyaml::marshal(&d.value);
                    let _ = goyaml::to_json(&d.value);
                    let _ = pyyaml::dump(&d.value, &pyyaml::DumpOptions::to_yaml());
                }
            }
        }
        let _ = yaml_to_json(&text);
        let _ = json_to_yaml(&text);
        let _ = goyaml::split_documents(&text);
    }
}
