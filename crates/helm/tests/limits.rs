//! Hostile templates end in an error — never a hang, a stack overflow or an abort.
//! Each test renders a one-file chart and checks the kind of error and that it came
//! quickly.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::time::{Duration, Instant};

use bosun_helm::render::{Chart, RenderErrorKind, RenderOptions};
use bosun_helm::template::exec::Limits;

fn render_with(
    template: &str,
    values: &str,
    limits: Limits,
) -> Result<String, (RenderErrorKind, String)> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("templates")).unwrap();
    std::fs::write(
        dir.path().join("Chart.yaml"),
        "apiVersion: v2\nname: hostile\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("values.yaml"), values).unwrap();
    std::fs::write(dir.path().join("templates/t.yaml"), template).unwrap();
    let chart = Chart::load(dir.path()).map_err(|e| (e.kind, e.message))?;
    let mut o = RenderOptions::new("r", "ns");
    o.limits = limits;
    let start = Instant::now();
    let r = chart.render(&o);
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
    r.map(|r| r.files.into_values().collect())
        .map_err(|e| (e.kind, e.message))
}

fn render(template: &str) -> Result<String, (RenderErrorKind, String)> {
    render_with(template, "", Limits::default())
}

#[test]
fn include_recursion_stops_at_helms_limit() {
    let (kind, msg) =
        render(r#"{{ define "a" }}{{ include "a" . }}{{ end }}{{ include "a" . }}"#).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Exec);
    assert!(
        msg.contains("rendering template has a nested reference name: a"),
        "{}",
        &msg[msg.len().saturating_sub(300)..]
    );
}

#[test]
fn mutual_include_recursion_ends() {
    let t = r#"{{ define "a" }}{{ include "b" . }}{{ end }}{{ define "b" }}{{ include "a" . }}{{ end }}{{ include "a" . }}"#;
    assert!(render(t).is_err());
}

#[test]
fn template_recursion_ends_at_gos_depth() {
    let (kind, msg) =
        render(r#"{{ define "a" }}{{ template "a" . }}{{ end }}{{ template "a" . }}"#).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Exec, "{msg}");
    assert!(
        msg.ends_with("exceeded maximum template depth (100000)"),
        "{msg}"
    );
}

/// Helm has no limit on `tpl` (Go's stack overflow ends it); bosun's backstop does.
#[test]
fn tpl_recursion_ends_at_the_nesting_backstop() {
    let (kind, msg) = render_with(
        "{{ tpl .Values.t . }}",
        "t: '{{ tpl .Values.t . }}'\n",
        Limits::default(),
    )
    .unwrap_err();
    assert_eq!(kind, RenderErrorKind::Limit, "{msg}");
    assert!(
        msg.contains("template nesting exceeds 110000 levels"),
        "{}",
        &msg[..300]
    );
}

/// `include` restarts Go's template depth and each name is under Helm's per-name limit
/// for a long time: the render-wide backstop ends it.
#[test]
fn include_and_template_recursion_interleaved_ends() {
    let t = r#"{{ define "t" }}{{ if gt (int .) 0 }}{{ template "t" (sub (int .) 1) }}{{ else }}{{ include "i" 0 }}{{ end }}{{ end }}{{ define "i" }}{{ template "t" 99990 }}{{ end }}{{ include "i" 0 }}"#;
    let (kind, msg) = render(t).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Limit, "{}", &msg[..300]);
}

/// The deepest chains Helm renders, on a thread with a 128 KiB stack: evaluation moves
/// to heap-allocated stack segments instead of overflowing.
#[test]
fn chains_as_deep_as_helm_allows_render_on_a_small_stack() {
    let deep = r#"{{ define "t" }}{{ if gt (int .) 0 }}{{ template "t" (sub (int .) 1) }}{{ else }}bottom{{ end }}{{ end }}{{ define "i" }}{{ template "t" 99999 }}{{ end }}{{ define "r" }}{{ if gt (int .) 0 }}{{ include "r" (sub (int .) 1) }}{{ else }}{{ include "i" . }}{{ end }}{{ end }}{{ include "r" 1000 }}|{{ tpl .Values.t (dict "n" 5000 "t" .Values.t) }}"#;
    let values = "t: '{{ if gt (int .n) 0 }}{{ tpl .t (dict \"n\" (sub (int .n) 1) \"t\" .t) }}{{ else }}tpl-bottom{{ end }}'\n";
    let out = std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(move || render_with(deep, values, Limits::default()))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(out.unwrap(), "bottom|tpl-bottom");
}

#[test]
fn output_size_is_bounded() {
    let limits = Limits {
        max_output_bytes: 1 << 20,
        ..Limits::default()
    };
    let (kind, _) =
        render_with("{{ range until 100000000 }}0123456789{{ end }}", "", limits).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Limit);
}

#[test]
fn loop_iterations_are_bounded() {
    let limits = Limits {
        max_iterations: 100_000,
        ..Limits::default()
    };
    let (kind, _) = render_with(
        "{{ range until 1000 }}{{ range until 1000 }}{{ end }}{{ end }}",
        "",
        limits,
    )
    .unwrap_err();
    assert_eq!(kind, RenderErrorKind::Limit);
}

#[test]
fn huge_lists_are_refused() {
    for t in [
        "{{ until 100000000000 }}",
        "{{ untilStep 0 100000000000 1 }}",
        "{{ seq 100000000000 }}",
    ] {
        let (kind, _) = render(t).unwrap_err();
        assert_eq!(kind, RenderErrorKind::Limit, "{t}");
    }
}

#[test]
fn huge_strings_are_refused() {
    for t in [
        r#"{{ repeat 1000000000 "xx" }}"#,
        r#"{{ indent 1000000000 "x" }}"#,
        r#"{{ randAlphaNum 1000000000 }}"#,
    ] {
        let (kind, _) = render(t).unwrap_err();
        assert_eq!(kind, RenderErrorKind::Limit, "{t}");
    }
}

#[test]
fn regex_size_is_bounded() {
    let (kind, _) = render(r#"{{ regexMatch "((a{100}){100}){100}" "a" }}"#).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Limit);
}

#[test]
fn deep_data_ends_in_errors() {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let out = render(&format!("{{{{ fromJsonArray {:?} }}}}", deep)).unwrap();
    assert!(out.contains("exceeded max depth"), "{out}");
    // A map that contains itself prints and converts without recursing forever.
    let out =
        render(r#"{{ $d := dict }}{{ $_ := set $d "self" $d }}{{ $d | len }} {{ toJson $d }}"#)
            .unwrap();
    assert!(out.starts_with("1 "), "{out}");
}

#[test]
fn deep_nesting_in_template_text_is_a_parse_error() {
    let t = format!("{{{{ {}1{} }}}}", "(".repeat(100_000), ")".repeat(100_000));
    let (kind, _) = render(&t).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Parse);
    let t = format!(
        "{}x{}",
        "{{ if true }}".repeat(100_000),
        "{{ end }}".repeat(100_000)
    );
    let (kind, _) = render(&t).unwrap_err();
    assert_eq!(kind, RenderErrorKind::Parse);
}

/// Data nested 500 levels deep (bosun's YAML reader stops at 512, go-yaml at 10000; its
/// printing and encoding at 1000), built by a template and passed through every function that walks data
/// recursively, on a thread with a 128 KiB stack: the walks run on heap-grown stack
/// segments, in the debug build too. The results are checked against each other (the
/// same data through different paths), not against fixed text.
#[test]
fn deep_data_through_recursive_functions_renders_on_a_small_stack() {
    // "r" calls itself 300 times and runs the walks at every level, so that some level
    // starts them with little stack left before the next segment.
    let walks = r#"{{ $d := dict "leaf" 1 }}{{ range until 500 }}{{ $d = dict "a" $d }}{{ end }}{{ $l := list 1 }}{{ range until 500 }}{{ $l = list $l }}{{ end }}{{ $j := toJson $d }}{{ $y := toYaml $d }}{{ $c := deepCopy $d }}{{ $m := mergeOverwrite (dict) $c (deepCopy $d) }}{{ $p := print $d }}{{ $t := toToml $d }}{{ $pj := toPrettyJson $d }}{{ $lj := toJson $l }}{{ $lp := print $l }}{{ eq (toJson $c) $j }} {{ eq (toJson $m) $j }} {{ eq (fromJson $j | toJson) $j }} {{ eq (fromYaml $y | toJson) $j }} {{ eq (fromJsonArray $lj | toJson) $lj }} {{ eq (fromYaml $y | toYaml) $y }} {{ gt (len $p) 2000 }} {{ gt (len $lp) 1000 }} {{ gt (len $t) 500 }} {{ gt (len $pj) 500 }} {{ deepEqual $c $d }}"#;
    let t = format!(
        r#"{{{{ define "walks" }}}}{walks}{{{{ end }}}}{{{{ define "r" }}}}{{{{ if gt . 0 }}}}{{{{ if eq (mod . 30) 0 }}}}{{{{ template "walks" }}}} {{{{ end }}}}{{{{ template "r" (sub . 1) }}}}{{{{ end }}}}{{{{ end }}}}{{{{ template "r" 300 }}}}"#
    );
    let out = std::thread::Builder::new()
        .stack_size(128 * 1024)
        .spawn(move || render(&t))
        .unwrap()
        .join()
        .unwrap();
    let out = out.unwrap();
    assert_eq!(out.split(' ').filter(|w| !w.is_empty()).count(), 10 * 11);
    assert!(
        out.split(' ')
            .filter(|w| !w.is_empty())
            .all(|w| w == "true"),
        "{}",
        &out[..out.len().min(600)]
    );
}
