//! The emitter states inside collections: flow sequences and mappings (`[a, b]`, `{k: v}`,
//! wrapped past the width), block sequences (at the parent key's indentation inside a
//! mapping) and block mappings (`? ` for keys that cannot be simple).

use super::{EmitEvent, Emitter, State};

impl Emitter<'_> {
    pub(super) fn emit_flow_sequence_item(&mut self, first: bool) {
        if first {
            self.write_indicator("[", true, true, false);
            self.increase_indent(true, false);
            self.flow_level += 1;
        }
        if *self.event() == EmitEvent::SequenceEnd {
            self.flow_level -= 1;
            self.pop_indent();
            self.write_indicator("]", false, false, false);
            self.pop_state();
            return;
        }
        if !first {
            self.write_indicator(",", false, false, false);
        }
        if self.column > self.best_width {
            self.write_indent();
        }
        self.states.push(State::FlowSequenceItem);
        self.emit_node(false, false);
    }

    pub(super) fn emit_flow_mapping_key(&mut self, first: bool) {
        if first {
            self.write_indicator("{", true, true, false);
            self.increase_indent(true, false);
            self.flow_level += 1;
        }
        if *self.event() == EmitEvent::MappingEnd {
            self.flow_level -= 1;
            self.pop_indent();
            self.write_indicator("}", false, false, false);
            self.pop_state();
            return;
        }
        if !first {
            self.write_indicator(",", false, false, false);
        }
        if self.column > self.best_width {
            self.write_indent();
        }
        if self.check_simple_key() {
            self.states.push(State::FlowMappingSimpleValue);
            self.emit_node(true, true);
        } else {
            self.write_indicator("?", true, false, false);
            self.states.push(State::FlowMappingValue);
            self.emit_node(true, false);
        }
    }

    pub(super) fn emit_flow_mapping_value(&mut self, simple: bool) {
        if simple {
            self.write_indicator(":", false, false, false);
        } else {
            if self.column > self.best_width {
                self.write_indent();
            }
            self.write_indicator(":", true, false, false);
        }
        self.states.push(State::FlowMappingKey);
        self.emit_node(true, false);
    }

    pub(super) fn emit_block_sequence_item(&mut self, first: bool) {
        if first {
            let indentless = self.mapping_context && !self.indention;
            self.increase_indent(false, indentless);
        }
        if *self.event() == EmitEvent::SequenceEnd {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.write_indent();
        self.write_indicator("-", true, false, true);
        self.states.push(State::BlockSequenceItem);
        self.emit_node(false, false);
    }

    pub(super) fn emit_block_mapping_key(&mut self, first: bool) {
        if first {
            self.increase_indent(false, false);
        }
        if *self.event() == EmitEvent::MappingEnd {
            self.pop_indent();
            self.pop_state();
            return;
        }
        self.write_indent();
        if self.check_simple_key() {
            self.states.push(State::BlockMappingSimpleValue);
            self.emit_node(true, true);
        } else {
            self.write_indicator("?", true, false, true);
            self.states.push(State::BlockMappingValue);
            self.emit_node(true, false);
        }
    }

    pub(super) fn emit_block_mapping_value(&mut self, simple: bool) {
        if simple {
            self.write_indicator(":", false, false, false);
        } else {
            self.write_indent();
            self.write_indicator(":", true, false, true);
        }
        self.states.push(State::BlockMappingKey);
        self.emit_node(true, false);
    }
}
