//! The emitter: events to text, after libyaml's state machine. go-yaml v2's emitter is a port
//! of libyaml 0.1's; PyYAML's `CSafeDumper` runs the libyaml bundled in its wheels. The
//! differences that show in output are switched by [`Dialect`]: where the plain-scalar
//! analysis sees a following break, the trailing space before an empty plain scalar, an
//! indent before a closing `'` after a final line break, and when `...` ends a document.
//!
//! The caller hands over the whole event list, so the emitter can look ahead as far as
//! libyaml's accumulation would (one event after DOCUMENT-START, two after SEQUENCE-START,
//! three after MAPPING-START).

mod scalar;
mod states;

use std::borrow::Cow;

pub(crate) use crate::syntax::Dialect;
use crate::syntax::ScalarStyle;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScalarEvent<'a> {
    pub tag: Option<String>,
    /// Borrowed from the tree being written where it can be (go-yaml's strings).
    pub value: Cow<'a, str>,
    pub plain_implicit: bool,
    pub quoted_implicit: bool,
    /// `None` lets the emitter choose (libyaml's ANY style).
    pub style: Option<ScalarStyle>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EmitEvent<'a> {
    StreamStart,
    StreamEnd,
    DocumentStart {
        implicit: bool,
    },
    DocumentEnd {
        implicit: bool,
    },
    Scalar(ScalarEvent<'a>),
    SequenceStart {
        tag: Option<String>,
        implicit: bool,
        flow: bool,
    },
    SequenceEnd,
    MappingStart {
        tag: Option<String>,
        implicit: bool,
        flow: bool,
    },
    MappingEnd,
}

/// Emitter settings (libyaml's `yaml_emitter_set_*`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub dialect: Dialect,
    pub indent: usize,
    /// Preferred line width; `None` means unlimited (libyaml's width -1).
    pub width: Option<usize>,
    pub unicode: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    StreamStart,
    FirstDocumentStart,
    DocumentStart,
    DocumentContent,
    DocumentEnd,
    FlowSequenceFirstItem,
    FlowSequenceItem,
    FlowMappingFirstKey,
    FlowMappingKey,
    FlowMappingSimpleValue,
    FlowMappingValue,
    BlockSequenceFirstItem,
    BlockSequenceItem,
    BlockMappingFirstKey,
    BlockMappingKey,
    BlockMappingSimpleValue,
    BlockMappingValue,
    End,
}

/// What `analyze_scalar` learned about a scalar's text.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ScalarAnalysis {
    pub multiline: bool,
    pub flow_plain_allowed: bool,
    pub block_plain_allowed: bool,
    pub single_quoted_allowed: bool,
    pub block_allowed: bool,
}

pub(crate) struct Emitter<'e> {
    pub(super) events: &'e [EmitEvent<'e>],
    pub(super) head: usize,
    pub(super) dialect: Dialect,
    pub(super) best_indent: usize,
    pub(super) best_width: usize,
    pub(super) unicode: bool,
    pub(super) out: String,
    pub(super) state: State,
    pub(super) states: Vec<State>,
    pub(super) indents: Vec<i64>,
    pub(super) indent: i64,
    pub(super) flow_level: usize,
    pub(super) mapping_context: bool,
    pub(super) simple_key_context: bool,
    pub(super) column: usize,
    pub(super) whitespace: bool,
    pub(super) indention: bool,
    /// 0: closed; 1: a document may need `...` before directives; 2: a `|+` scalar ended the
    /// stream and needs `...`. go-yaml uses it as a plain boolean.
    pub(super) open_ended: u8,
    pub(super) tag_handle: Option<String>,
    pub(super) tag_suffix: Option<String>,
    pub(super) analysis: ScalarAnalysis,
}

/// Writes `events` (a whole stream) as text.
pub(crate) fn emit(events: &[EmitEvent<'_>], settings: Settings) -> String {
    let mut emitter = Emitter::new(events, settings);
    while emitter.head < events.len() {
        emitter.analyze_event();
        emitter.state_machine();
        emitter.head += 1;
    }
    emitter.out
}

impl<'e> Emitter<'e> {
    pub(super) fn new(events: &'e [EmitEvent<'e>], settings: Settings) -> Emitter<'e> {
        let best_indent = if (2..=9).contains(&settings.indent) {
            settings.indent
        } else {
            2
        };
        let best_width = match settings.width {
            None => i32::MAX as usize,
            Some(w) if w <= best_indent * 2 => 80,
            Some(w) => w,
        };
        Emitter {
            events,
            head: 0,
            dialect: settings.dialect,
            best_indent,
            best_width,
            unicode: settings.unicode,
            out: String::with_capacity(128),
            state: State::StreamStart,
            states: Vec::with_capacity(8),
            indents: Vec::with_capacity(8),
            indent: -1,
            flow_level: 0,
            mapping_context: false,
            simple_key_context: false,
            column: 0,
            whitespace: true,
            indention: true,
            open_ended: 0,
            tag_handle: None,
            tag_suffix: None,
            analysis: ScalarAnalysis::default(),
        }
    }

    pub(super) fn event(&self) -> &EmitEvent<'e> {
        &self.events[self.head]
    }

    pub(super) fn analyze_event(&mut self) {
        self.tag_handle = None;
        self.tag_suffix = None;
        // The event list outlives the emitter's borrow of itself: no copy of the event.
        let events = self.events;
        match &events[self.head] {
            EmitEvent::Scalar(s) => {
                if let Some(tag) = &s.tag {
                    if !s.plain_implicit && !s.quoted_implicit {
                        self.analyze_tag(tag);
                    }
                }
                self.analysis = self.analyze_scalar(&s.value);
            }
            EmitEvent::SequenceStart {
                tag: Some(tag),
                implicit: false,
                ..
            }
            | EmitEvent::MappingStart {
                tag: Some(tag),
                implicit: false,
                ..
            } => {
                self.analyze_tag(tag);
            }
            _ => {}
        }
    }

    pub(super) fn analyze_tag(&mut self, tag: &str) {
        // Only the default directives exist: `!` -> `!`, `!!` -> `tag:yaml.org,2002:`.
        for (handle, prefix) in [("!", "!"), ("!!", "tag:yaml.org,2002:")] {
            let matches = match self.dialect {
                // libyaml wants a non-empty suffix; go-yaml takes any prefix match.
                Dialect::LibYaml => tag.len() > prefix.len() && tag.starts_with(prefix),
                Dialect::GoYamlV2 => tag.starts_with(prefix),
            };
            if matches {
                self.tag_handle = Some(handle.to_string());
                self.tag_suffix = Some(tag[prefix.len()..].to_string());
                return;
            }
        }
        self.tag_suffix = Some(tag.to_string());
    }

    pub(super) fn state_machine(&mut self) {
        match self.state {
            State::StreamStart => {
                self.indent = -1;
                self.column = 0;
                self.whitespace = true;
                self.indention = true;
                self.open_ended = 0;
                self.state = State::FirstDocumentStart;
            }
            State::FirstDocumentStart => self.emit_document_start(true),
            State::DocumentStart => self.emit_document_start(false),
            State::DocumentContent => {
                self.states.push(State::DocumentEnd);
                self.emit_node(false, false);
            }
            State::DocumentEnd => self.emit_document_end(),
            State::FlowSequenceFirstItem => self.emit_flow_sequence_item(true),
            State::FlowSequenceItem => self.emit_flow_sequence_item(false),
            State::FlowMappingFirstKey => self.emit_flow_mapping_key(true),
            State::FlowMappingKey => self.emit_flow_mapping_key(false),
            State::FlowMappingSimpleValue => self.emit_flow_mapping_value(true),
            State::FlowMappingValue => self.emit_flow_mapping_value(false),
            State::BlockSequenceFirstItem => self.emit_block_sequence_item(true),
            State::BlockSequenceItem => self.emit_block_sequence_item(false),
            State::BlockMappingFirstKey => self.emit_block_mapping_key(true),
            State::BlockMappingKey => self.emit_block_mapping_key(false),
            State::BlockMappingSimpleValue => self.emit_block_mapping_value(true),
            State::BlockMappingValue => self.emit_block_mapping_value(false),
            State::End => {}
        }
    }

    pub(super) fn pop_state(&mut self) {
        self.state = self.states.pop().unwrap_or(State::End);
    }

    pub(super) fn pop_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    pub(super) fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { self.best_indent as i64 } else { 0 };
        } else if !indentless {
            self.indent += self.best_indent as i64;
        }
    }

    pub(super) fn emit_document_start(&mut self, first: bool) {
        match self.event() {
            EmitEvent::DocumentStart { implicit } => {
                let implicit = *implicit && first;
                self.open_ended = 0;
                if !implicit {
                    self.write_indent();
                    self.write_indicator("---", true, false, false);
                }
                self.state = State::DocumentContent;
            }
            EmitEvent::StreamEnd => {
                // go-yaml's Marshal clears `open_ended` before the stream end, so only
                // libyaml's keep-chomped block scalar ever ends a stream with `...`.
                if self.dialect == Dialect::LibYaml && self.open_ended == 2 {
                    self.write_indicator("...", true, false, false);
                    self.open_ended = 0;
                    self.write_indent();
                }
                self.state = State::End;
            }
            _ => self.state = State::End,
        }
    }

    pub(super) fn emit_document_end(&mut self) {
        let EmitEvent::DocumentEnd { implicit } = *self.event() else {
            return;
        };
        self.write_indent();
        if !implicit {
            self.write_indicator("...", true, false, false);
            self.open_ended = 0;
            self.write_indent();
        } else if self.dialect == Dialect::LibYaml && self.open_ended == 0 {
            self.open_ended = 1;
        }
        self.state = State::DocumentStart;
    }

    pub(super) fn emit_node(&mut self, mapping: bool, simple_key: bool) {
        self.mapping_context = mapping;
        self.simple_key_context = simple_key;
        let events = self.events;
        match &events[self.head] {
            EmitEvent::Scalar(s) => self.emit_scalar(s),
            &EmitEvent::SequenceStart { flow, .. } => {
                self.process_tag();
                let empty = self.events.get(self.head + 1) == Some(&EmitEvent::SequenceEnd);
                self.state = if self.flow_level > 0 || flow || empty {
                    State::FlowSequenceFirstItem
                } else {
                    State::BlockSequenceFirstItem
                };
            }
            &EmitEvent::MappingStart { flow, .. } => {
                self.process_tag();
                let empty = self.events.get(self.head + 1) == Some(&EmitEvent::MappingEnd);
                self.state = if self.flow_level > 0 || flow || empty {
                    State::FlowMappingFirstKey
                } else {
                    State::BlockMappingFirstKey
                };
            }
            _ => self.pop_state(),
        }
    }

    pub(super) fn emit_scalar(&mut self, event: &ScalarEvent<'_>) {
        let style = self.select_scalar_style(event);
        self.process_tag();
        self.increase_indent(true, false);
        self.process_scalar(&event.value, style);
        self.pop_indent();
        self.pop_state();
    }

    /// Whether the next node fits on one line as a key (at most 128 bytes).
    pub(super) fn check_simple_key(&self) -> bool {
        let tag_len = self.tag_handle.as_ref().map_or(0, String::len)
            + self.tag_suffix.as_ref().map_or(0, String::len);
        let next = self.events.get(self.head + 1);
        let length = match self.event() {
            EmitEvent::Scalar(s) => {
                if self.analysis.multiline {
                    return false;
                }
                tag_len + s.value.len()
            }
            EmitEvent::SequenceStart { .. } => {
                if next != Some(&EmitEvent::SequenceEnd) {
                    return false;
                }
                tag_len
            }
            EmitEvent::MappingStart { .. } => {
                if next != Some(&EmitEvent::MappingEnd) {
                    return false;
                }
                tag_len
            }
            _ => return false,
        };
        length <= 128
    }

    pub(super) fn select_scalar_style(&mut self, event: &ScalarEvent<'_>) -> ScalarStyle {
        let no_tag = self.tag_handle.is_none() && self.tag_suffix.is_none();
        let mut style = event.style.unwrap_or(ScalarStyle::Plain);
        let a = &self.analysis;
        if self.simple_key_context && a.multiline {
            style = ScalarStyle::DoubleQuoted;
        }
        if style == ScalarStyle::Plain {
            if (self.flow_level > 0 && !a.flow_plain_allowed)
                || (self.flow_level == 0 && !a.block_plain_allowed)
            {
                style = ScalarStyle::SingleQuoted;
            }
            if event.value.is_empty() && (self.flow_level > 0 || self.simple_key_context) {
                style = ScalarStyle::SingleQuoted;
            }
            if no_tag && !event.plain_implicit {
                style = ScalarStyle::SingleQuoted;
            }
        }
        if style == ScalarStyle::SingleQuoted && !a.single_quoted_allowed {
            style = ScalarStyle::DoubleQuoted;
        }
        if matches!(style, ScalarStyle::Literal | ScalarStyle::Folded)
            && (!a.block_allowed || self.flow_level > 0 || self.simple_key_context)
        {
            style = ScalarStyle::DoubleQuoted;
        }
        if no_tag && !event.quoted_implicit && style != ScalarStyle::Plain {
            self.tag_handle = Some("!".to_string());
        }
        style
    }

    pub(super) fn process_tag(&mut self) {
        match (self.tag_handle.clone(), self.tag_suffix.clone()) {
            (None, None) => {}
            (Some(handle), suffix) => {
                self.write_tag_handle(&handle);
                if let Some(suffix) = suffix {
                    self.write_tag_content(&suffix);
                }
            }
            (None, Some(suffix)) => {
                self.write_indicator("!<", true, false, false);
                self.write_tag_content(&suffix);
                self.write_indicator(">", false, false, false);
            }
        }
    }

    pub(super) fn process_scalar(&mut self, value: &str, style: ScalarStyle) {
        let allow_breaks = !self.simple_key_context;
        match style {
            ScalarStyle::Plain => self.write_plain(value, allow_breaks),
            ScalarStyle::SingleQuoted => self.write_single_quoted(value, allow_breaks),
            ScalarStyle::DoubleQuoted => self.write_double_quoted(value, allow_breaks),
            ScalarStyle::Literal => self.write_literal(value),
            ScalarStyle::Folded => self.write_folded(value),
        }
    }

    // ---- low-level writers ----

    pub(super) fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    pub(super) fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    /// Copies a line break from a scalar: LF as the configured break, others verbatim.
    pub(super) fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    pub(super) fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    pub(super) fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        for c in indicator.chars() {
            self.put(c);
        }
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    pub(super) fn write_tag_handle(&mut self, handle: &str) {
        if !self.whitespace {
            self.put(' ');
        }
        for c in handle.chars() {
            self.put(c);
        }
        self.whitespace = false;
        self.indention = false;
    }

    pub(super) fn write_tag_content(&mut self, content: &str) {
        for c in content.chars() {
            let keep = c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '-' | ';'
                        | '/'
                        | '?'
                        | ':'
                        | '@'
                        | '&'
                        | '='
                        | '+'
                        | '$'
                        | ','
                        | '_'
                        | '.'
                        | '~'
                        | '*'
                        | '\''
                        | '('
                        | ')'
                        | '['
                        | ']'
                );
            if keep {
                self.put(c);
            } else {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    self.out.push_str(&format!("%{b:02X}"));
                    self.column += 3;
                }
            }
        }
        self.whitespace = false;
        self.indention = false;
    }
}
