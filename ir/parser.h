// Reads the text form that ir/printer.h writes (the grammar below), so that
// print(parse(print(g))) == print(g) for every valid graph.
//
//   program  := 'program' '@' NAME '{' graph* '}'          -- parse_program only
//   graph    := 'graph' '@' NAME '(' [param (',' param)*] ')' '{' stmt* return '}'
//   param    := '%' NAME ':' type [buffer] [state]         -- a graph input
//   state    := 'state' STRING                             -- StateBinding (non-empty name)
//   stmt     := result (',' result)* '=' rhs
//   result   := '%' NAME ':' type [buffer]
//   buffer   := '@' NAME '+' INT                            -- Value::buffer (plan_buffers)
//   rhs      := 'weight' STRING                            -- a constant
//             | OP [STRING] '(' [operand (',' operand)*] ')' [attrs]
//   operand  := '%' NAME | '_'                             -- '_': absent operand
//   attrs    := '{' [IDENT '=' literal (',' IDENT '=' literal)*] '}'
//   literal  := INT | FLOAT | STRING | '[' [number (',' number)*] ']'
//   return   := 'return' [ret (',' ret)*]
//   ret      := '%' NAME [state]
//   type     := DTYPE '[' [INT (',' INT)*] ']' ['{' ('nhwc' | 'logical') [':' 'cpad' '=' INT] '}']
//
// NAME is [A-Za-z0-9_.-]+ or a string literal; FLOAT has a '.' or an exponent, or is
// inf / nan / -inf / -nan; a list with any FLOAT is a float list. `// ...` comments
// and all whitespace (newlines included) are ignored. The node name (STRING after
// OP) may be left out in hand-written text: it then defaults to the first result's
// name (the printer always writes it).
//
// Checks while reading: values are defined once and before use; OP is in the op
// table; each node's attributes pass check_attrs and its declared result types
// equal (shape and dtype) those infer_output_types computes; weight names are not
// empty; `state` appears only on graph inputs and returned values (not on a
// constant or node result), each state is read by at most one input and written by
// at most one returned value, and a value written back to a state the graph reads has
// the read's shape and dtype. parse_program also rejects two plans of one name and
// runs verify_program. Every error starts with "LINE:COL: " and says what was expected or which
// node is wrong, e.g.
//   "3:3: expected ')' after the operands (or ',' before another operand), got 'return'"
//   "2:24: undefined value %nope"
//   "4:3: node 'decoder.conv_in' (conv2d): declared f32[1,64,8,8] for %decoder.conv_in, inferred f32[1,64,6,6]"
#pragma once

#include "ir/graph.h"
#include "ir/program.h"
#include "ir/status.h"

#include <string_view>

namespace strata {

Expected<Graph> parse_graph(std::string_view text);
// A program as print_program writes it (ir/printer.h).
Expected<ProgramGraph> parse_program(std::string_view text);

}  // namespace strata
