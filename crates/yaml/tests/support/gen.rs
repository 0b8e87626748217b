//! A deterministic generator of test inputs: value trees (for the writers) and YAML texts in
//! every scalar and collection style (for the readers). Seeded, so failures reproduce.

use bosun_yaml::{Node, Yaml};

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Words YAML 1.1 (and 1.2) give meaning to, numbers in every notation, and indicator-laden
/// texts: each is a string value whose quoting must follow the engine's rules.
pub const SPECIAL_WORDS: &[&str] = &[
    "y",
    "Y",
    "yes",
    "Yes",
    "YES",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "true",
    "True",
    "TRUE",
    "false",
    "False",
    "FALSE",
    "on",
    "On",
    "ON",
    "off",
    "Off",
    "OFF",
    "null",
    "Null",
    "NULL",
    "~",
    "",
    "yEs",
    "nO",
    "tRue",
    "NuLL",
    ".inf",
    ".Inf",
    ".INF",
    "-.inf",
    "+.inf",
    ".nan",
    ".NaN",
    "inf",
    "NaN",
    "nan",
    "infinity",
    "-Infinity",
    "0",
    "00",
    "-0",
    "+0",
    "007",
    "08",
    "010",
    "0777",
    "0o17",
    "0O17",
    "0x1F",
    "0X1f",
    "0x",
    "0b101",
    "0B11",
    "-0b11",
    "1_000",
    "1__0",
    "_1",
    "1_",
    "0x_1F",
    "12345678901234567890",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "9223372036854775807",
    "123456789012345678901234567890",
    "1e3",
    "1E3",
    "1e+3",
    "1e-3",
    "1.0e+3",
    "3.0e+2",
    "1.",
    ".5",
    "+.5",
    "-.5",
    "0.",
    "1.0",
    "-1.5",
    "1e400",
    "-1e400",
    "1e-400",
    "6.02e23",
    "1.5_5",
    "._5",
    ".",
    "..",
    "...",
    "1:20",
    "1:20:30",
    "-1:20",
    "12:30:45",
    "1:60",
    "190:20:30.15",
    "1:20.5",
    "2024-01-01",
    "2024-1-1",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "2001-12-14T21:59:43Z",
    "2001-12-14 21:59:43.10",
    "2023-02-29",
    "2024-02-29",
    "2024-13-01",
    "20240101",
    "=",
    "<<",
    "<",
    "-",
    "--",
    "---",
    "- x",
    "-x",
    "?",
    "? x",
    "?x",
    ":",
    ": x",
    ":x",
    "a: b",
    "a:b",
    "a :b",
    "#x",
    "a #b",
    "a#b",
    "@x",
    "`x",
    "%x",
    "!x",
    "!",
    "&x",
    "*x",
    "|",
    ">",
    "{x",
    "[x",
    "x}",
    "x]",
    "x,y",
    "'x'",
    "\"x\"",
    "with 'single'",
    "with \"double\"",
    "a\\b",
    " lead",
    "trail ",
    " both ",
    "  ",
    " ",
    "\t",
    "tab\tx",
    "é",
    "日本語",
    "😀",
    "mixé😀",
    "\u{85}",
    "\u{a0}",
    "\u{2028}",
    "\u{feff}x",
    "x\u{feff}",
    "\u{1}",
    "\u{7f}",
    "\u{1b}",
    "a\u{0}b",
    "line\nnext",
    "\nlead-nl",
    "trailing-nl\n",
    "two\n\n",
    "\n",
    "\n\n",
    " \nx",
    "x \ny",
    "x\n y",
    "x\r\ny",
    "x\ry",
    "a\u{2029}b",
    "--- x",
    "... x",
    "x ---",
    "0.1",
    "1e21",
    "1e+21",
    "100000",
    "1000000",
    "1.234567e+06",
    "<<x",
    "b64==",
    "a,b",
    "{}",
    "[]",
    "{a: b}",
    "[a, b]",
    "\"",
    "'",
    "''",
    "key: value # comment",
];

const WORDS: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "nginx",
    "app",
    "name",
    "image",
    "tag",
    "latest",
    "replicas",
    "port",
    "true",
    "on",
    "yes",
    "1",
    "01",
    "a1",
    "a10",
    "a9",
    "b2c",
    "A",
    "Z",
    "_x",
    "-x",
    "x-y",
    "x.y",
    "x/y",
    "x:y",
    "é",
    "Ω",
    "日本",
    "中",
    "١٢",
    "٣",
    "a١",
    "x_1",
    "x_01",
    "version",
    "v1",
    "v10",
    "v2",
    "path",
    "/",
    "http://x.y/z",
    "C:\\dir",
    "$HOME",
    "50%",
];

/// A random string built from the pools, sometimes long, sometimes multi-line.
pub fn string(rng: &mut Rng) -> String {
    match rng.below(10) {
        0..=3 => rng.pick(SPECIAL_WORDS).to_string(),
        4..=5 => rng.pick(WORDS).to_string(),
        6 => {
            // Long text with spaces: folding at the line width.
            let n = 5 + rng.below(40);
            let words: Vec<&str> = (0..n).map(|_| *rng.pick(WORDS)).collect();
            let sep = if rng.chance(20) { "  " } else { " " };
            words.join(sep)
        }
        7 => {
            // Long text without spaces.
            let n = 60 + rng.below(120);
            (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect()
        }
        8 => {
            // Multi-line text with assorted ends.
            let n = 1 + rng.below(4);
            let mut lines: Vec<String> = (0..n).map(|_| rng.pick(WORDS).to_string()).collect();
            if rng.chance(30) {
                lines.insert(0, String::new());
            }
            if rng.chance(20) {
                lines[0] = format!("  {}", lines[0]);
            }
            let mut s = lines.join(if rng.chance(20) { "\n\n" } else { "\n" });
            match rng.below(5) {
                0 => s.push('\n'),
                1 => s.push_str("\n\n"),
                2 => s.push(' '),
                _ => {}
            }
            s
        }
        _ => {
            let a = rng.pick(SPECIAL_WORDS);
            let b = rng.pick(WORDS);
            match rng.below(3) {
                0 => format!("{a}{b}"),
                1 => format!("{a} {b}"),
                _ => format!("{b}{a}"),
            }
        }
    }
}

/// A float64 as Go holds JSON numbers: integers small and huge, fractions, exponents.
pub fn float(rng: &mut Rng) -> f64 {
    match rng.below(8) {
        0 => rng.below(1000) as f64,
        1 => -(rng.below(100000) as f64),
        2 => 10f64.powi(rng.below(30) as i32),
        3 => (rng.next() % 10_000_000_000_000_000_000) as f64,
        4 => (rng.below(1_000_000) as f64) / 1000.0,
        5 => 1.0 / (1 + rng.below(1000)) as f64,
        6 => 10f64.powi(-(rng.below(12) as i32)),
        _ => f64::from_bits(rng.next() >> 2),
    }
}

pub fn key(rng: &mut Rng) -> String {
    if rng.chance(70) {
        rng.pick(WORDS).to_string()
    } else {
        string(rng)
    }
}

/// A value as Helm holds values passed as JSON: strings, float64s, bools, nulls, lists,
/// maps with string keys.
pub fn json_value(rng: &mut Rng, depth: usize) -> Yaml {
    let leaf = depth == 0 || rng.chance(40);
    if leaf {
        return match rng.below(10) {
            0..=5 => Yaml::Str(string(rng)),
            6..=7 => Yaml::Float(float(rng)),
            8 => Yaml::Bool(rng.chance(50)),
            _ => Yaml::Null,
        };
    }
    if rng.chance(50) {
        let n = rng.below(5);
        Yaml::Seq(
            (0..n)
                .map(|_| Node::new(json_value(rng, depth - 1)))
                .collect(),
        )
    } else {
        let n = rng.below(6);
        let mut pairs: Vec<(Node, Node)> = Vec::new();
        for _ in 0..n {
            let k = key(rng);
            if pairs
                .iter()
                .any(|(pk, _)| pk.value.as_str() == Some(k.as_str()))
            {
                continue;
            }
            pairs.push((
                Node::new(Yaml::Str(k)),
                Node::new(json_value(rng, depth - 1)),
            ));
        }
        Yaml::Map(pairs)
    }
}

/// A YAML document text mixing block and flow collections, all scalar styles, comments,
/// anchors, aliases, merge keys and tags. Plain scalars are drawn from the special words,
/// so many documents are (deliberately) invalid: errors are compared too.
pub fn yaml_text(rng: &mut Rng) -> String {
    let mut w = TextGen {
        rng,
        anchors: Vec::new(),
        map_anchors: Vec::new(),
        counter: 0,
    };
    let mut out = String::new();
    if w.rng.chance(10) {
        out.push_str("---\n");
    }
    if w.rng.chance(5) {
        out.push_str("# leading comment\n");
    }
    let n = 1 + w.rng.below(5);
    w.block_map(&mut out, 0, n, 3);
    if w.rng.chance(5) {
        out.push_str("...\n");
    }
    out
}

struct TextGen<'r> {
    rng: &'r mut Rng,
    anchors: Vec<String>,
    map_anchors: Vec<String>,
    counter: usize,
}

impl TextGen<'_> {
    /// A plain scalar: mostly one that is valid where it goes, sometimes any special word.
    fn plain_token(&mut self, flow: bool) -> String {
        let candidates: &[&str] = if self.rng.chance(70) {
            SPECIAL_WORDS
        } else {
            WORDS
        };
        for _ in 0..20 {
            let t = self.rng.pick(candidates).to_string();
            if self.rng.chance(3) || plain_safe(&t, flow) {
                return t;
            }
        }
        "text".to_string()
    }

    fn scalar(&mut self, indent: usize, flow: bool) -> String {
        let s = string(self.rng);
        match self.rng.below(if flow { 4 } else { 6 }) {
            0 | 1 => self.plain_token(flow),
            2 => format!("'{}'", s.replace('\'', "''")),
            3 => double_quoted(&s),
            4 => {
                let chomp = *self.rng.pick(&["", "-", "+"]);
                let body: String = s
                    .split('\n')
                    .map(|l| format!("{}{}\n", " ".repeat(indent + 2), l))
                    .collect();
                format!("|{chomp}\n{body}")
            }
            _ => {
                let chomp = *self.rng.pick(&["", "-", "+"]);
                let body: String = s
                    .split('\n')
                    .map(|l| format!("{}{}\n", " ".repeat(indent + 2), l))
                    .collect();
                format!(">{chomp}\n{body}")
            }
        }
    }

    fn properties(&mut self, is_map: bool) -> String {
        let mut p = String::new();
        if self.rng.chance(8) {
            self.counter += 1;
            let name = format!("a{}", self.counter);
            p.push_str(&format!("&{name} "));
            if is_map {
                self.map_anchors.push(name.clone());
            }
            self.anchors.push(name);
        }
        if !is_map && self.rng.chance(5) {
            let tags = ["!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "! "];
            p.push_str(tags[self.rng.below(tags.len())]);
        }
        p
    }

    fn flow_value(&mut self, depth: usize) -> String {
        if depth > 0 && self.rng.chance(30) {
            let n = self.rng.below(4);
            let items: Vec<String> = (0..n).map(|_| self.flow_value(depth - 1)).collect();
            return format!("[{}]", items.join(", "));
        }
        if depth > 0 && self.rng.chance(20) {
            let n = self.rng.below(4);
            let items: Vec<String> = (0..n)
                .map(|_| format!("{}: {}", self.flow_key(), self.flow_value(depth - 1)))
                .collect();
            return format!("{{{}}}", items.join(", "));
        }
        if !self.anchors.is_empty() && self.rng.chance(5) {
            return format!("*{}", self.rng.pick(&self.anchors).clone());
        }
        let props = self.properties(false);
        format!("{props}{}", self.scalar(0, true))
    }

    fn flow_key(&mut self) -> String {
        match self.rng.below(3) {
            0 => double_quoted(&key(self.rng)),
            _ => self.rng.pick(WORDS).to_string(),
        }
    }

    fn block_key(&mut self) -> String {
        match self.rng.below(6) {
            0 => double_quoted(&key(self.rng)),
            1 => format!("'{}'", key(self.rng).replace('\'', "''").replace('\n', " ")),
            2 => self.plain_token(false),
            _ => self.rng.pick(WORDS).to_string(),
        }
    }

    fn block_map(&mut self, out: &mut String, indent: usize, n: usize, depth: usize) {
        for i in 0..n {
            if i > 0 || !out.ends_with(": ") && !out.ends_with("- ") {
                out.push_str(&" ".repeat(indent));
            }
            if i > 0 && !self.map_anchors.is_empty() && self.rng.chance(5) {
                let a = self.rng.pick(&self.map_anchors).clone();
                out.push_str(&format!("<<: *{a}\n"));
                continue;
            }
            let k = self.block_key();
            out.push_str(&k);
            out.push(':');
            self.block_value(out, indent, depth);
        }
    }

    fn block_value(&mut self, out: &mut String, indent: usize, depth: usize) {
        let choice = if depth == 0 { 0 } else { self.rng.below(10) };
        match choice {
            0..=4 => {
                out.push(' ');
                if !self.anchors.is_empty() && self.rng.chance(4) {
                    let a = self.rng.pick(&self.anchors).clone();
                    out.push_str(&format!("*{a}\n"));
                    return;
                }
                let props = self.properties(false);
                let s = self.scalar(indent, false);
                out.push_str(&props);
                out.push_str(&s);
                if !s.ends_with('\n') {
                    if self.rng.chance(10) {
                        out.push_str(" # note");
                    }
                    out.push('\n');
                }
            }
            5..=6 => {
                let props = self.properties(true);
                out.push_str(format!(" {props}").trim_end());
                out.push('\n');
                let n = 1 + self.rng.below(4);
                self.block_map(out, indent + 2, n, depth - 1);
            }
            7..=8 => {
                out.push('\n');
                let n = 1 + self.rng.below(4);
                let seq_indent = if self.rng.chance(50) {
                    indent
                } else {
                    indent + 2
                };
                for _ in 0..n {
                    out.push_str(&" ".repeat(seq_indent));
                    out.push_str("- ");
                    if self.rng.chance(25) && depth > 1 {
                        let m = 1 + self.rng.below(3);
                        self.block_map(out, seq_indent + 2, m, depth - 2);
                    } else {
                        let s = self.flow_value(1);
                        out.push_str(&s);
                        out.push('\n');
                    }
                }
            }
            _ => {
                out.push(' ');
                let v = self.flow_value(2);
                out.push_str(&v);
                out.push('\n');
            }
        }
    }
}

/// Whether `t` reads back as one plain scalar in block (or flow) context.
fn plain_safe(t: &str, flow: bool) -> bool {
    let first = match t.chars().next() {
        Some(c) => c,
        None => return false,
    };
    let indicator_start = "-?:,[]{}#&*!|>'\"%@`".contains(first);
    let dash_ok = first == '-' && t.len() > 1 && !t[1..].starts_with(' ');
    (!indicator_start || dash_ok)
        && !t.contains(": ")
        && !t.ends_with(':')
        && !t.contains(" #")
        && t.trim() == t
        && t.chars()
            .all(|c| c >= ' ' && c != '\u{7f}' && !('\u{80}'..='\u{9f}').contains(&c))
        && !t.contains('\u{2028}')
        && !t.contains('\u{2029}')
        && !t.contains('\u{feff}')
        && !(flow && t.chars().any(|c| ",[]{}".contains(c)))
        && t != "---"
        && t != "..."
}

pub fn double_quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The same document with one random edit, to compare error reporting.
pub fn mutate(rng: &mut Rng, text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return ":".into();
    }
    let at = rng.below(chars.len());
    let insert = *rng.pick(&[
        ':', '-', '[', ']', '{', '}', '\'', '"', '\t', ' ', '\n', '#', '&', '*', '!', '|', '>',
        '?', ',', '%', '@',
    ]);
    let mut out: Vec<char> = chars.clone();
    match rng.below(3) {
        0 => {
            out.remove(at);
        }
        1 => out.insert(at, insert),
        _ => out[at] = insert,
    }
    out.into_iter().collect()
}

/// A value of the kinds PyYAML represents: Python ints of any size, floats (NaN and
/// infinities included), str, bool, None, bytes, dates and datetimes, lists, dicts with
/// (mostly) string keys.
pub fn python_value(rng: &mut Rng, depth: usize) -> Yaml {
    use bosun_yaml::{Timestamp, TimestampTime};
    let leaf = depth == 0 || rng.chance(40);
    if leaf {
        return match rng.below(16) {
            0..=6 => Yaml::Str(string(rng)),
            7 => Yaml::Int(rng.next() as i64 >> rng.below(64)),
            8 => Yaml::BigInt(format!("{}{}", rng.next(), rng.next())),
            9 => Yaml::Float(float(rng)),
            10 => Yaml::Float(*rng.pick(&[
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                -0.0,
                1e16,
                1e17,
                0.1,
            ])),
            11 => Yaml::Bool(rng.chance(50)),
            12 => Yaml::Null,
            13 => Yaml::Binary((0..rng.below(120)).map(|_| rng.next() as u8).collect()),
            14 => Yaml::Timestamp(Timestamp {
                year: 1900 + rng.below(200) as i32,
                month: 1 + rng.below(12) as u8,
                day: 1 + rng.below(28) as u8,
                time: None,
            }),
            _ => Yaml::Timestamp(Timestamp {
                year: 1970 + rng.below(100) as i32,
                month: 1 + rng.below(12) as u8,
                day: 1 + rng.below(28) as u8,
                time: Some(TimestampTime {
                    hour: rng.below(24) as u8,
                    minute: rng.below(60) as u8,
                    second: rng.below(60) as u8,
                    microsecond: if rng.chance(50) {
                        0
                    } else {
                        rng.below(1_000_000) as u32
                    },
                    offset_minutes: match rng.below(3) {
                        0 => None,
                        1 => Some(0),
                        _ => Some(rng.below(1400) as i32 - 700),
                    },
                }),
            }),
        };
    }
    if rng.chance(45) {
        let n = rng.below(5);
        Yaml::Seq(
            (0..n)
                .map(|_| Node::new(python_value(rng, depth - 1)))
                .collect(),
        )
    } else {
        let n = rng.below(6);
        let mut pairs: Vec<(Node, Node)> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let mixed = rng.chance(10);
        for _ in 0..n {
            let k = if mixed && rng.chance(40) {
                match rng.below(4) {
                    0 => Yaml::Int(rng.below(1000) as i64 - 500),
                    1 => Yaml::Float(rng.below(100) as f64 + 0.5),
                    2 => Yaml::Null,
                    _ => Yaml::Bool(rng.chance(50)),
                }
            } else if rng.chance(5) {
                Yaml::Int(rng.below(100) as i64)
            } else {
                Yaml::Str(key(rng))
            };
            // Python folds 1, 1.0 and True into one key; keep keys distinct for it.
            let canon = match &k {
                Yaml::Bool(b) => format!("n{}", u8::from(*b)),
                Yaml::Int(i) => format!("n{i}"),
                Yaml::Float(f) => format!("n{f}"),
                Yaml::Null => "none".into(),
                Yaml::Str(s) => format!("s{s}"),
                _ => String::new(),
            };
            if seen.contains(&canon) {
                continue;
            }
            seen.push(canon);
            pairs.push((Node::new(k), Node::new(python_value(rng, depth - 1))));
        }
        Yaml::Map(pairs)
    }
}
