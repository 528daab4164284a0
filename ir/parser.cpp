#include "ir/parser.h"

#include "ir/infer.h"
#include "ir/printer.h"
#include "ir/verifier.h"

#include <charconv>
#include <unordered_map>

namespace strata {
namespace {

// The largest element count of a parsed type (and any one dimension): products of a
// few such numbers and a byte size stay inside int64.
constexpr int64_t kMaxElements = int64_t(1) << 48;

struct Pos {
  int line = 1;
  int col = 1;
};

std::string pos_str(Pos p) { return fmt::format("{}:{}", p.line, p.col); }

enum class Tok { end, value, global, ident, integer, floating, string, punct };

struct Token {
  Tok kind = Tok::end;
  std::string text;  // name, identifier, decoded string contents or number spelling
  char punct = 0;
  Pos pos;
};

// How a token is quoted in "expected X, got Y".
std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::end: return "end of input";
    case Tok::value: return "'%" + name_token(t.text) + "'";
    case Tok::global: return "'@" + name_token(t.text) + "'";
    case Tok::string: return attr_value_str(AttrValue{t.text});
    case Tok::punct: return fmt::format("'{}'", t.punct);
    default: return "'" + t.text + "'";
  }
}

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }
bool is_name_char(char c) { return is_ident_char(c) || c == '.' || c == '-'; }

// Splits the text into tokens on demand, tracking line and column (1-based, bytes).
class Lexer {
public:
  explicit Lexer(std::string_view text) : s_(text) {}

  Status next(Token& t) {
    skip_space_and_comments();
    t = Token{};
    t.pos = pos_;
    if (i_ >= s_.size()) return Status::ok();
    char c = s_[i_];
    if (c == '%' || c == '@') {
      advance();
      t.kind = c == '%' ? Tok::value : Tok::global;
      return read_name(t, c);
    }
    if (c == '"') {
      t.kind = Tok::string;
      return read_string(t.text);
    }
    if (is_ident_start(c)) {
      t.kind = Tok::ident;
      while (i_ < s_.size() && is_ident_char(s_[i_])) t.text += advance();
      return Status::ok();
    }
    if (is_digit(c) || c == '-' || c == '+') return read_number(t);
    if (std::string_view("(){}[],:=").find(c) != std::string_view::npos) {
      t.kind = Tok::punct;
      t.punct = advance();
      return Status::ok();
    }
    return error("{}: unexpected character {}", pos_str(pos_),
                 attr_value_str(AttrValue{std::string(1, c)}));
  }

private:
  char advance() {
    char c = s_[i_++];
    if (c == '\n') {
      ++pos_.line;
      pos_.col = 1;
    } else {
      ++pos_.col;
    }
    return c;
  }

  void skip_space_and_comments() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else {
        break;
      }
    }
  }

  Status read_name(Token& t, char sigil) {
    if (i_ < s_.size() && s_[i_] == '"') {
      Pos p = pos_;
      STRATA_RETURN_IF_ERROR(read_string(t.text));
      if (t.text.empty()) return error("{}: empty name after '{}'", pos_str(p), sigil);
      return Status::ok();
    }
    while (i_ < s_.size() && is_name_char(s_[i_])) t.text += advance();
    if (t.text.empty())
      return error("{}: expected a name ([A-Za-z0-9_.-]+ or a string) after '{}'", pos_str(pos_), sigil);
    return Status::ok();
  }

  // A string literal with the escapes attr_value_str writes.
  Status read_string(std::string& out) {
    Pos start = pos_;
    advance();  // opening quote
    while (true) {
      if (i_ >= s_.size() || s_[i_] == '\n')
        return error("{}: unterminated string (expected '\"' before the end of the line)", pos_str(start));
      Pos esc = pos_;
      char c = advance();
      if (c == '"') return Status::ok();
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = i_ < s_.size() && s_[i_] != '\n' ? advance() : '\0';
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'x': {
          int v = 0;
          for (int k = 0; k < 2; ++k) {
            char h = i_ < s_.size() ? s_[i_] : '\0';
            int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) return error("{}: expected two hex digits after \\x", pos_str(pos_));
            advance();
            v = v * 16 + d;
          }
          out += static_cast<char>(v);
          break;
        }
        default:
          return error("{}: unknown escape \\{} (expected \\\" \\\\ \\n \\t \\r or \\xHH)", pos_str(esc),
                       e == '\0' ? std::string() : std::string(1, e));
      }
    }
  }

  // [+-]digits[.digits][e[+-]digits], or [+-]inf / [+-]nan.
  Status read_number(Token& t) {
    if (s_[i_] == '-' || s_[i_] == '+') t.text += advance();
    if (i_ < s_.size() && is_ident_start(s_[i_])) {
      std::string word;
      while (i_ < s_.size() && is_ident_char(s_[i_])) word += advance();
      if (word != "inf" && word != "nan")
        return error("{}: expected a number after '{}', got '{}'", pos_str(t.pos), t.text, word);
      t.kind = Tok::floating;
      t.text += word;
      return Status::ok();
    }
    auto digits = [&] {
      size_t n = 0;
      for (; i_ < s_.size() && is_digit(s_[i_]); ++n) t.text += advance();
      return n;
    };
    if (digits() == 0) return error("{}: expected digits in a number", pos_str(pos_));
    t.kind = Tok::integer;
    if (i_ < s_.size() && s_[i_] == '.') {
      t.kind = Tok::floating;
      t.text += advance();
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      t.kind = Tok::floating;
      t.text += advance();
      if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) t.text += advance();
      if (digits() == 0) return error("{}: expected digits in the exponent of a number", pos_str(pos_));
    }
    return Status::ok();
  }

  std::string_view s_;
  size_t i_ = 0;
  Pos pos_;
};

class Parser {
public:
  explicit Parser(std::string_view text) : lex_(text) {}

  Expected<Graph> parse() {
    STRATA_RETURN_IF_ERROR(next());
    STRATA_ASSIGN_OR_RETURN(Graph g, parse_one_graph());
    if (tok_.kind != Tok::end) return expected("end of input after the graph");
    return g;
  }

  Expected<ProgramGraph> parse_program() {
    ProgramGraph p;
    STRATA_RETURN_IF_ERROR(next());
    STRATA_RETURN_IF_ERROR(expect_keyword("program", "at the start of a program"));
    if (tok_.kind != Tok::global) return expected("'@' and the program's name after 'program'");
    p.name = tok_.text;
    STRATA_RETURN_IF_ERROR(next());
    STRATA_RETURN_IF_ERROR(expect_punct('{', "to open the program body"));
    std::unordered_map<std::string, Pos> plan_at;
    while (is_keyword("graph")) {
      Pos at = tok_.pos;
      STRATA_ASSIGN_OR_RETURN(Graph g, parse_one_graph());
      auto [it, fresh] = plan_at.emplace(g.name, at);
      if (!fresh)
        return error("{}: plan @{} is already defined (at {})", pos_str(at), name_token(g.name), pos_str(it->second));
      p.plans.push_back(std::move(g));
    }
    STRATA_RETURN_IF_ERROR(expect_punct('}', "to close the program body (or 'graph' to start another plan)"));
    if (tok_.kind != Tok::end) return expected("end of input after the program");
    STRATA_RETURN_IF_ERROR(verify_program(p).with_context("parsed program fails verification"));
    return p;
  }

private:
  // `graph @NAME(...) { ... }` from the current token on.
  Expected<Graph> parse_one_graph() {
    g_ = Graph();
    defined_at_.clear();
    reads_at_.clear();
    writes_at_.clear();
    STRATA_RETURN_IF_ERROR(expect_keyword("graph", "at the start of a graph"));
    if (tok_.kind != Tok::global) return expected("'@' and the graph's name after 'graph'");
    g_.name = tok_.text;
    STRATA_RETURN_IF_ERROR(next());
    STRATA_RETURN_IF_ERROR(expect_punct('(', "to open the graph's input list"));
    if (!is_punct(')')) {
      while (true) {
        STRATA_RETURN_IF_ERROR(parse_input());
        if (!is_punct(',')) break;
        STRATA_RETURN_IF_ERROR(next());
      }
    }
    STRATA_RETURN_IF_ERROR(expect_punct(')', "after the graph's inputs (or ',' before another input)"));
    STRATA_RETURN_IF_ERROR(expect_punct('{', "to open the graph body"));
    while (!is_keyword("return")) {
      if (tok_.kind != Tok::value) return expected("a statement ('%name: type = ...') or 'return'");
      STRATA_RETURN_IF_ERROR(parse_statement());
    }
    STRATA_RETURN_IF_ERROR(parse_return());
    STRATA_RETURN_IF_ERROR(expect_punct('}', "to close the graph body"));
    // The checks above imply the verifier's; running it guards the parser itself.
    STRATA_RETURN_IF_ERROR(verify(g_).with_context("parsed graph fails verification"));
    return std::move(g_);
  }

  struct Result {
    std::string name;
    TensorType type;
    Pos pos;
    std::optional<BufferAssignment> buffer;
    std::optional<std::string> state;  // ` state "NAME"` (graph inputs only)
    Pos state_pos;
  };

  Status next() { return lex_.next(tok_); }
  bool is_punct(char c) const { return tok_.kind == Tok::punct && tok_.punct == c; }
  bool is_keyword(std::string_view w) const { return tok_.kind == Tok::ident && tok_.text == w; }

  Status expected(std::string_view what) const {
    return error("{}: expected {}, got {}", pos_str(tok_.pos), what, describe(tok_));
  }
  Status expect_punct(char c, std::string_view context) {
    if (!is_punct(c)) return expected(fmt::format("'{}' {}", c, context));
    return next();
  }
  Status expect_keyword(std::string_view w, std::string_view context) {
    if (!is_keyword(w)) return expected(fmt::format("'{}' {}", w, context));
    return next();
  }

  Expected<int64_t> parse_int(std::string_view what) {
    if (tok_.kind != Tok::integer) return expected(what);
    int64_t v = 0;
    const char* b = tok_.text.data();
    const char* e = b + tok_.text.size();
    if (*b == '+') ++b;
    auto [ptr, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || ptr != e) return error("{}: integer {} out of range", pos_str(tok_.pos), tok_.text);
    STRATA_RETURN_IF_ERROR(next());
    return v;
  }

  Expected<double> parse_float() {
    const char* b = tok_.text.data();
    const char* e = b + tok_.text.size();
    if (*b == '+') ++b;
    double v = 0;
    auto [ptr, ec] = std::from_chars(b, e, v);
    // from_chars reports out-of-range for values that round to 0 or inf; the printer
    // never writes those, so they are errors here rather than silent roundings.
    if (ec != std::errc() || ptr != e) return error("{}: float {} out of range", pos_str(tok_.pos), tok_.text);
    STRATA_RETURN_IF_ERROR(next());
    return v;
  }

  Status define_check(const std::string& name, Pos pos) {
    auto it = defined_at_.find(name);
    if (it != defined_at_.end())
      return error("{}: %{} is already defined (at {})", pos_str(pos), name_token(name), pos_str(it->second));
    defined_at_[name] = pos;
    return Status::ok();
  }

  // DTYPE '[' dims ']' ['{' layout '}']
  Expected<TensorType> parse_type() {
    TensorType t;
    if (tok_.kind != Tok::ident) return expected("a type such as f32[1,64,8,8]");
    auto dtype = parse_dtype(tok_.text);
    if (!dtype) return error("{}: {}", pos_str(tok_.pos), dtype.message());
    t.dtype = *dtype;
    STRATA_RETURN_IF_ERROR(next());
    STRATA_RETURN_IF_ERROR(expect_punct('[', "to open the shape after the dtype"));
    if (!is_punct(']')) {
      int64_t nonzero = 1;  // product of the non-zero dimensions
      while (true) {
        Pos dim_pos = tok_.pos;
        STRATA_ASSIGN_OR_RETURN(int64_t d, parse_int("a dimension (an integer)"));
        if (d < 0) return error("{}: dimension {} is negative", pos_str(dim_pos), d);
        // Shape arithmetic (element counts, byte sizes) is int64: a type that could
        // overflow it is no tensor.
        if (d > kMaxElements || (d > 0 && nonzero > kMaxElements / d))
          return error("{}: the shape has more than 2^48 elements", pos_str(dim_pos));
        if (d > 0) nonzero *= d;
        t.shape.push_back(d);
        if (!is_punct(',')) break;
        STRATA_RETURN_IF_ERROR(next());
      }
    }
    STRATA_RETURN_IF_ERROR(expect_punct(']', "to close the shape (or ',' before another dimension)"));
    if (is_punct('{')) {
      STRATA_RETURN_IF_ERROR(next());
      if (is_keyword("nhwc")) t.layout.kind = LayoutKind::nhwc;
      else if (!is_keyword("logical")) return expected("a layout ('nhwc' or 'logical')");
      STRATA_RETURN_IF_ERROR(next());
      if (is_punct(':')) {
        STRATA_RETURN_IF_ERROR(next());
        STRATA_RETURN_IF_ERROR(expect_keyword("cpad", "after ':' in a layout"));
        STRATA_RETURN_IF_ERROR(expect_punct('=', "after 'cpad'"));
        Pos cpad_pos = tok_.pos;
        STRATA_ASSIGN_OR_RETURN(t.layout.padded_channels, parse_int("the padded channel count"));
        if (t.layout.padded_channels < 0 || t.layout.padded_channels > kMaxElements)
          return error("{}: padded channel count {} is out of range", pos_str(cpad_pos), t.layout.padded_channels);
      }
      STRATA_RETURN_IF_ERROR(expect_punct('}', "to close the layout"));
    }
    return t;
  }

  Expected<Result> parse_result() {
    if (tok_.kind != Tok::value) return expected("a value ('%name')");
    Result r;
    r.name = tok_.text;
    r.pos = tok_.pos;
    STRATA_RETURN_IF_ERROR(next());
    STRATA_RETURN_IF_ERROR(expect_punct(':', fmt::format("and a type after %{}", name_token(r.name))));
    STRATA_ASSIGN_OR_RETURN(r.type, parse_type());
    if (tok_.kind == Tok::global) {  // ` @arena+offset` (plan_buffers)
      BufferAssignment b{tok_.text, 0};
      STRATA_RETURN_IF_ERROR(next());
      if (tok_.kind != Tok::integer || tok_.text.empty() || tok_.text[0] != '+')
        return expected(fmt::format("'+' and a byte offset after '@{}'", name_token(b.arena)));
      STRATA_ASSIGN_OR_RETURN(int64_t offset, parse_int("a byte offset"));
      b.offset = static_cast<uint64_t>(offset);
      r.buffer = std::move(b);
    }
    if (is_keyword("state")) {
      r.state_pos = tok_.pos;
      STRATA_ASSIGN_OR_RETURN(r.state, parse_state_name());
    }
    return r;
  }

  // 'state' STRING: the state's name, non-empty.
  Expected<std::string> parse_state_name() {
    STRATA_RETURN_IF_ERROR(next());  // 'state'
    if (tok_.kind != Tok::string) return expected("the state's name (a string) after 'state'");
    if (tok_.text.empty()) return error("{}: empty state name", pos_str(tok_.pos));
    std::string name = tok_.text;
    STRATA_RETURN_IF_ERROR(next());
    return name;
  }

  // A state bound once per direction in a graph (the verifier's rule, with a position).
  static Status bind_once(std::unordered_map<std::string, Pos>& at, const std::string& state, Pos pos,
                          std::string_view verb) {
    auto [it, fresh] = at.emplace(state, pos);
    if (!fresh)
      return error("{}: state '{}' is already {} (at {})", pos_str(pos), state, verb, pos_str(it->second));
    return Status::ok();
  }

  Status parse_input() {
    STRATA_ASSIGN_OR_RETURN(Result r, parse_result());
    STRATA_RETURN_IF_ERROR(define_check(r.name, r.pos));
    ValueId id = kNoValue;
    if (r.state) {
      STRATA_RETURN_IF_ERROR(bind_once(reads_at_, *r.state, r.state_pos, "read by an input"));
      id = g_.add_state_input(r.name, r.type, *r.state);
    } else {
      id = g_.add_input(r.name, r.type);
    }
    g_.value(id).buffer = r.buffer;
    return Status::ok();
  }

  // A use of a defined value; `_` when `allow_absent`.
  Expected<ValueId> parse_use(bool allow_absent) {
    if (allow_absent && is_keyword("_")) {
      STRATA_RETURN_IF_ERROR(next());
      return kNoValue;
    }
    if (tok_.kind != Tok::value) return expected(allow_absent ? "an operand ('%name' or '_')" : "a value ('%name')");
    ValueId id = g_.find_value(tok_.text);
    if (id == kNoValue) return error("{}: undefined value %{}", pos_str(tok_.pos), name_token(tok_.text));
    STRATA_RETURN_IF_ERROR(next());
    return id;
  }

  Expected<AttrValue> parse_literal() {
    if (tok_.kind == Tok::integer) {
      STRATA_ASSIGN_OR_RETURN(int64_t v, parse_int("an integer"));
      return AttrValue{v};
    }
    if (tok_.kind == Tok::floating) {
      STRATA_ASSIGN_OR_RETURN(double v, parse_float());
      return AttrValue{v};
    }
    if (is_keyword("inf") || is_keyword("nan")) {
      STRATA_ASSIGN_OR_RETURN(double v, parse_float());
      return AttrValue{v};
    }
    if (tok_.kind == Tok::string) {
      std::string s = tok_.text;
      STRATA_RETURN_IF_ERROR(next());
      return AttrValue{std::move(s)};
    }
    if (!is_punct('[')) return expected("an attribute value (number, string or [list])");
    STRATA_RETURN_IF_ERROR(next());
    std::vector<int64_t> ints;
    std::vector<double> floats;
    bool any_float = false;
    if (!is_punct(']')) {
      while (true) {
        if (tok_.kind == Tok::integer) {
          STRATA_ASSIGN_OR_RETURN(int64_t v, parse_int("a number"));
          ints.push_back(v);
          floats.push_back(static_cast<double>(v));
        } else if (tok_.kind == Tok::floating || is_keyword("inf") || is_keyword("nan")) {
          STRATA_ASSIGN_OR_RETURN(double v, parse_float());
          floats.push_back(v);
          any_float = true;
        } else {
          return expected("a number in the list");
        }
        if (!is_punct(',')) break;
        STRATA_RETURN_IF_ERROR(next());
      }
    }
    STRATA_RETURN_IF_ERROR(expect_punct(']', "to close the list (or ',' before another number)"));
    if (any_float) return AttrValue{std::move(floats)};
    return AttrValue{std::move(ints)};
  }

  Expected<Attrs> parse_attrs() {
    Attrs attrs;
    STRATA_RETURN_IF_ERROR(next());  // '{'
    if (is_punct('}')) {
      STRATA_RETURN_IF_ERROR(next());
      return attrs;
    }
    while (true) {
      if (tok_.kind != Tok::ident) return expected("an attribute name");
      std::string key = tok_.text;
      Pos key_pos = tok_.pos;
      if (attrs.has(key)) return error("{}: attribute '{}' given twice", pos_str(key_pos), key);
      STRATA_RETURN_IF_ERROR(next());
      STRATA_RETURN_IF_ERROR(expect_punct('=', fmt::format("after attribute name '{}'", key)));
      STRATA_ASSIGN_OR_RETURN(AttrValue v, parse_literal());
      attrs.set(key, std::move(v));
      if (!is_punct(',')) break;
      STRATA_RETURN_IF_ERROR(next());
    }
    STRATA_RETURN_IF_ERROR(expect_punct('}', "to close the attributes (or ',' before another)"));
    return attrs;
  }

  Status parse_statement() {
    Pos stmt_pos = tok_.pos;
    std::vector<Result> results;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(Result r, parse_result());
      STRATA_RETURN_IF_ERROR(define_check(r.name, r.pos));
      results.push_back(std::move(r));
      if (!is_punct(',')) break;
      STRATA_RETURN_IF_ERROR(next());
    }
    STRATA_RETURN_IF_ERROR(expect_punct('=', "after the result types (or ',' before another result)"));
    for (const Result& r : results)
      if (r.state)
        return error("{}: 'state' on {} %{}: only graph inputs and returned values carry a state",
                     pos_str(r.state_pos), is_keyword("weight") ? "the constant" : "the node result",
                     name_token(r.name));
    if (is_keyword("weight")) return parse_constant(results);
    return parse_node(results, stmt_pos);
  }

  Status parse_constant(const std::vector<Result>& results) {
    STRATA_RETURN_IF_ERROR(next());  // 'weight'
    if (results.size() != 1)
      return error("{}: a weight defines exactly one value, got {}", pos_str(results[1].pos), results.size());
    if (tok_.kind != Tok::string || tok_.text.empty()) return expected("the weight's tensor name (a non-empty string)");
    ValueId id = g_.add_constant(results[0].name, results[0].type, tok_.text);
    g_.value(id).buffer = results[0].buffer;
    return next();
  }

  Status parse_node(const std::vector<Result>& results, Pos stmt_pos) {
    if (tok_.kind != Tok::ident) return expected("an op name or 'weight' after '='");
    auto op = op_from_name(tok_.text);
    if (!op) return error("{}: unknown op '{}'", pos_str(tok_.pos), tok_.text);
    STRATA_RETURN_IF_ERROR(next());
    Node node;
    node.op = *op;
    node.name = results[0].name;
    if (tok_.kind == Tok::string) {
      node.name = tok_.text;
      STRATA_RETURN_IF_ERROR(next());
    }
    STRATA_RETURN_IF_ERROR(expect_punct('(', fmt::format("to open the operands of {}", op_name(*op))));
    if (!is_punct(')')) {
      while (true) {
        STRATA_ASSIGN_OR_RETURN(ValueId v, parse_use(true));
        node.inputs.push_back(v);
        if (!is_punct(',')) break;
        STRATA_RETURN_IF_ERROR(next());
      }
    }
    STRATA_RETURN_IF_ERROR(expect_punct(')', "after the operands (or ',' before another operand)"));
    if (is_punct('{')) {
      STRATA_ASSIGN_OR_RETURN(node.attrs, parse_attrs());
    }

    // Re-derive the result types and compare with what the text declares.
    auto where = [&] { return fmt::format("{}: node '{}' ({})", pos_str(stmt_pos), node.name, op_name(node.op)); };
    std::vector<const TensorType*> types;
    for (ValueId v : node.inputs) types.push_back(v == kNoValue ? nullptr : &g_.value(v).type);
    auto inferred = infer_output_types(node.op, node.attrs, types);
    if (!inferred) return error("{}: {}", where(), inferred.message());
    if (inferred->size() != results.size())
      return error("{}: declares {} results, the op defines {}", where(), results.size(), inferred->size());
    for (size_t i = 0; i < results.size(); ++i) {
      const TensorType& d = results[i].type;
      const TensorType& t = (*inferred)[i];
      if (d.shape != t.shape || d.dtype != t.dtype)
        return error("{}: declared {} for %{}, inferred {}", where(), type_str(d), name_token(results[i].name),
                     type_str(t));
    }
    for (const Result& r : results) {
      node.outputs.push_back(g_.add_value(r.name, r.type));
      g_.value(node.outputs.back()).buffer = r.buffer;
    }
    g_.add_node(std::move(node));
    return Status::ok();
  }

  Status parse_return() {
    STRATA_RETURN_IF_ERROR(next());  // 'return'
    if (tok_.kind != Tok::value) return Status::ok();
    while (true) {
      Pos use_pos = tok_.pos;
      STRATA_ASSIGN_OR_RETURN(ValueId v, parse_use(false));
      if (is_keyword("state")) {
        Pos state_pos = tok_.pos;
        STRATA_ASSIGN_OR_RETURN(std::string state, parse_state_name());
        STRATA_RETURN_IF_ERROR(bind_once(writes_at_, state, state_pos, "written by a returned value"));
        STRATA_RETURN_IF_ERROR(check_write_type(state, v, use_pos));
        g_.mark_state_output(v, state);
      } else {
        g_.mark_output(v);
      }
      if (!is_punct(',')) break;
      STRATA_RETURN_IF_ERROR(next());
    }
    return Status::ok();
  }

  // A value written back to a state this graph reads has the read's shape and dtype.
  Status check_write_type(const std::string& state, ValueId v, Pos pos) const {
    for (const StateBinding& r : g_.state_reads()) {
      if (r.state != state) continue;
      const TensorType& a = g_.value(g_.inputs()[r.index]).type;
      const TensorType& b = g_.value(v).type;
      if (a.shape != b.shape || a.dtype != b.dtype)
        return error("{}: state '{}' is read as %{}: {} but written back as %{}: {}", pos_str(pos), state,
                     name_token(g_.value(g_.inputs()[r.index]).name), type_str(a), name_token(g_.value(v).name),
                     type_str(b));
    }
    return Status::ok();
  }

  Lexer lex_;
  Token tok_;
  Graph g_;
  std::unordered_map<std::string, Pos> defined_at_;
  std::unordered_map<std::string, Pos> reads_at_;   // state -> where an input reads it
  std::unordered_map<std::string, Pos> writes_at_;  // state -> where a returned value writes it
};

}  // namespace

Expected<Graph> parse_graph(std::string_view text) { return Parser(text).parse(); }
Expected<ProgramGraph> parse_program(std::string_view text) { return Parser(text).parse_program(); }

}  // namespace strata
