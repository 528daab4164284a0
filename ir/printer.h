// The text form of the IR: every IR object prints (so a failing test or a
// --dump-graph shows the graph, not a pointer), and a whole graph prints in a form
// that ir/parser.h reads back exactly: print(parse(print(g))) == print(g).
//
// Example (the golden test PrinterTest.HeaderExample prints exactly this):
//
//   graph @flux_decoder(%z: f32[1,16,8,8]) {
//     %decoder.conv_in.weight: f32[64,16,3,3] = weight "decoder.conv_in.weight"
//     %decoder.conv_in.bias: f32[64] = weight "decoder.conv_in.bias"
//     %decoder.conv_in: f32[1,64,8,8] = conv2d "decoder.conv_in" (%z, %decoder.conv_in.weight, %decoder.conv_in.bias) {pad = [1, 1], stride = [1, 1]}
//     %ln.beta: f32[8] = weight "ln.beta"
//     %ln: f32[1,64,8,8] = layer_norm "ln" (%decoder.conv_in, _, %ln.beta) {eps = 1e-05}
//     %act: f16[1,64,8,8]{nhwc:cpad=64} = cast "act" (%ln) {dtype = "f16"}
//     %"odd name": f32[1,64,8,8] = silu "odd name" (%ln)
//     return %act, %"odd name"
//   }
//
// The format, line by line:
//   - Header: `graph @NAME(%in: TYPE, ...) {` lists the graph inputs in order.
//   - Constants: `%NAME: TYPE = weight "WEIGHT"`; WEIGHT is the WeightStore tensor.
//     A constant is printed on the line before the first node that reads it (in that
//     node's operand order); constants no node reads are printed just before `return`,
//     in creation order. The parser creates values in text order, so the rule
//     reproduces itself.
//   - Nodes: `%OUT: TYPE[, %OUT2: TYPE] = OP "NODE NAME" (OPERANDS) {ATTRS}` in graph
//     (topological) order. An absent optional operand prints as `_` (also in the
//     middle of the list). The attribute block is omitted when empty; attributes
//     print sorted by name via attrs_str: floats round-trip exactly and always show a
//     '.', 'e', "inf" or "nan", ints never do; an empty list prints `[]` and parses
//     back as an int list (check_attrs accepts it where floats are declared).
//   - Footer: `return %a, %b` (just `return` for no outputs), then `}`.
//   - State (ir/graph.h StateBinding): an input that reads a state carries
//     ` state "NAME"` after its type (and buffer), `%acc: f32[4] state "sum"`; a
//     returned value written back to a state carries it after its name,
//     `return %y, %acc.next state "sum"`.
//   - Programs (ir/program.h): `program @NAME {`, then each plan's graph in order,
//     every line indented by two more spaces, then `}`.
//   - Types print via type_str: `f32[1,64,8,8]`, `f16[1,64,8,8]{nhwc:cpad=64}`, `f32[]`.
//     A value placed by plan_buffers (Value::buffer) adds ` @ARENA+OFFSET` after its
//     type, in the input list and on the line that defines it: `%h: f16[...] @act+4096`.
//   - Names: a value (`%`) or graph (`@`) name made only of [A-Za-z0-9_.-] prints bare;
//     any other name prints as a string literal, `%"a b"`. String literals (names,
//     weight names, string attributes) escape `"` and `\` with a backslash, newline,
//     tab and CR as \n \t \r and other control bytes as \xHH (attr_value_str).
//   - Indentation is two spaces; one statement per line; no trailing spaces.
//
// Printing never fails: in a broken graph, an out-of-range value id prints as
// `%<bad id 42>` and an unknown op as `<op 99>` (the parser rejects both), so
// verifier failures can show the offending graph.
#pragma once

#include "ir/graph.h"
#include "ir/program.h"

#include <ostream>
#include <string>

namespace strata {

// The whole graph in the text form above; ends with "}\n".
std::string print_graph(const Graph& g);
// A program: `program @NAME {`, each plan's print_graph indented by two spaces, `}`.
std::string print_program(const ProgramGraph& p);

// One object each. `to_string(node, g)` is the node's statement without indentation
// (as in print_graph); `to_string(node)` without a graph writes operands by id (%#3).
// `to_string(value)` is `%name: TYPE`, plus ` = weight "W"` for a constant.
std::string to_string(const Graph& g);
std::string to_string(const ProgramGraph& p);
std::string to_string(const Node& node, const Graph& g);
std::string to_string(const Node& node);
std::string to_string(const Value& value);
std::string to_string(const TensorType& type);
std::string to_string(const Layout& layout);
std::string to_string(DType dtype);
std::string to_string(Op op);
std::string to_string(ValueKind kind);  // "input", "constant", "intermediate"
std::string to_string(const Attrs& attrs);
std::string to_string(const StateBinding& b);  // `state "sum" at 1`

// `%name` for a value id of `g` (quoted when needed, `%<bad id N>` when out of range,
// `_` for kNoValue).
std::string value_ref(const Graph& g, ValueId id);
// A name as the text form writes it after `%` or `@`: bare when made only of
// [A-Za-z0-9_.-] (and non-empty), else a quoted string literal.
std::string name_token(const std::string& name);

// Stream forms so that GoogleTest and logs print IR objects readably.
std::ostream& operator<<(std::ostream& os, const Graph& g);
std::ostream& operator<<(std::ostream& os, const ProgramGraph& p);
std::ostream& operator<<(std::ostream& os, const Node& node);
std::ostream& operator<<(std::ostream& os, const Value& value);
std::ostream& operator<<(std::ostream& os, const TensorType& type);
std::ostream& operator<<(std::ostream& os, const Layout& layout);
std::ostream& operator<<(std::ostream& os, DType dtype);
std::ostream& operator<<(std::ostream& os, Op op);
std::ostream& operator<<(std::ostream& os, ValueKind kind);
std::ostream& operator<<(std::ostream& os, const Attrs& attrs);
std::ostream& operator<<(std::ostream& os, const StateBinding& b);

}  // namespace strata
