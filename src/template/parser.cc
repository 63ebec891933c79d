#include "template/parser.h"

#include <algorithm>

#include "core/error.h"
#include "template/lexer.h"

namespace vireo::tmpl {

namespace {

constexpr int kMaxDepth = 200;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse_root() {
    std::string found;
    Body b = parse_body({}, &found);
    return b;
  }

 private:
  // ---- token helpers
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(const std::string& msg) const {
    throw vireo::Error("chat template: line " + std::to_string(cur().line) + ": " + msg);
  }
  std::string describe() const {
    const Token& c = cur();
    if (c.type == Tok::Name || c.type == Tok::Op) return "'" + c.text + "'";
    return tok_describe(c.type);
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) error(std::string("expected '") + op + "', got " + describe());
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) error("expected name, got " + describe());
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) error("expected end of statement block, got " + describe());
    next();
  }
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& pp) : p(pp) {
      if (++p.depth_ > kMaxDepth) p.error("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };
  template <class T>
  std::unique_ptr<T> node() {
    auto n = std::make_unique<T>();
    n->line = cur().line;
    return n;
  }

  // ---- statements
  // Parses until a block tag whose name is in `ends`; leaves the rest of that tag unconsumed.
  Body parse_body(const std::vector<std::string>& ends, std::string* found) {
    DepthGuard g(*this);
    Body body;
    while (true) {
      const Token& c = cur();
      if (c.type == Tok::Eof) {
        if (!ends.empty()) error("unexpected end of template, expected " + join_tags(ends));
        return body;
      }
      if (c.type == Tok::Data) {
        auto s = node<TextStmt>();
        s->text = c.text;
        body.push_back(std::move(s));
        next();
      } else if (c.type == Tok::VarBegin) {
        next();
        auto s = node<OutputStmt>();
        s->expr = parse_tuple(false, true, {});
        if (cur().type != Tok::VarEnd) error("expected end of print statement, got " + describe());
        next();
        body.push_back(std::move(s));
      } else if (c.type == Tok::BlockBegin) {
        next();
        if (cur().type != Tok::Name) error("tag name expected");
        const std::string& name = cur().text;
        if (std::find(ends.begin(), ends.end(), name) != ends.end()) {
          *found = name;
          next();
          return body;
        }
        body.push_back(parse_statement(ends));
      } else {
        error("unexpected " + describe());
      }
    }
  }

  static std::string join_tags(const std::vector<std::string>& ends) {
    std::string s;
    for (size_t k = 0; k < ends.size(); ++k) s += (k ? " or '" : "'") + ends[k] + "'";
    return s;
  }

  StmtPtr parse_statement(const std::vector<std::string>& ends) {
    std::string name = cur().text;
    int line = cur().line;
    next();
    StmtPtr s;
    if (name == "if") s = parse_if();
    else if (name == "for") s = parse_for();
    else if (name == "set") s = parse_set();
    else if (name == "macro") s = parse_macro();
    else if (name == "call") s = parse_call_block();
    else if (name == "filter") s = parse_filter_block();
    else if (name == "with") s = parse_with();
    else if (name == "generation") s = parse_generation();
    else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) error("'" + name + "' outside of a loop");
      auto lc = node<LoopControlStmt>();
      lc->is_break = name == "break";
      expect_block_end();
      s = std::move(lc);
    } else {
      std::string msg = "unknown tag '" + name + "'";
      if (!ends.empty()) msg += ", expected " + join_tags(ends);
      throw vireo::Error("chat template: line " + std::to_string(line) + ": " + msg);
    }
    s->line = line;
    return s;
  }

  StmtPtr parse_if() {
    auto s = node<IfStmt>();
    ExprPtr cond = parse_tuple(false, true, {});
    while (true) {
      expect_block_end();
      std::string found;
      Body b = parse_body({"elif", "else", "endif"}, &found);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (found == "elif") {
        cond = parse_tuple(false, true, {});
        continue;
      }
      if (found == "else") {
        expect_block_end();
        s->otherwise = parse_body({"endif"}, &found);
      }
      expect_block_end();
      return s;
    }
  }

  Target parse_target(bool with_namespace) {
    Target t;
    std::string first = expect_name();
    if (with_namespace && is_op(".")) {
      next();
      t.names.push_back(first);
      t.attr = expect_name();
      return t;
    }
    t.names.push_back(first);
    while (skip_op(",")) {
      if (is_name("in") || is_op("=")) break;
      t.unpack = true;
      t.names.push_back(expect_name());
    }
    if (t.names.size() > 1) t.unpack = true;
    return t;
  }

  StmtPtr parse_for() {
    auto s = node<ForStmt>();
    bool paren = skip_op("(");
    s->target = parse_target(false);
    if (paren) expect_op(")");
    if (!skip_name("in")) error("expected 'in', got " + describe());
    s->iter = parse_tuple(false, false, {"recursive", "if"});
    if (skip_name("if")) s->filter = parse_expression(true);
    if (skip_name("recursive")) error("recursive for loops are not supported");
    expect_block_end();
    std::string found;
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"}, &found);
    --loop_depth_;
    if (found == "else") {
      expect_block_end();
      s->otherwise = parse_body({"endfor"}, &found);
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    int line = cur().line;
    Target t = parse_target(true);
    if (skip_op("=")) {
      auto s = node<SetStmt>();
      s->line = line;
      s->target = std::move(t);
      s->value = parse_tuple(false, true, {});
      expect_block_end();
      return s;
    }
    auto s = node<SetBlockStmt>();
    s->target = std::move(t);
    parse_filter_chain(s->filters);
    expect_block_end();
    std::string found;
    s->body = parse_body({"endset"}, &found);
    expect_block_end();
    return s;
  }

  void parse_filter_chain(std::vector<std::unique_ptr<FilterExpr>>& out) {
    while (skip_op("|")) out.push_back(parse_filter_tail(nullptr));
  }

  std::unique_ptr<MacroStmt> parse_macro_signature(std::unique_ptr<MacroStmt> m) {
    expect_op("(");
    while (!is_op(")")) {
      if (!m->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string p = expect_name();
      ExprPtr def;
      if (skip_op("=")) def = parse_expression(true);
      m->params.emplace_back(p, std::move(def));
    }
    expect_op(")");
    return m;
  }

  StmtPtr parse_macro() {
    auto m = node<MacroStmt>();
    m->name = expect_name();
    m = parse_macro_signature(std::move(m));
    expect_block_end();
    std::string found;
    int saved = loop_depth_;
    loop_depth_ = 0;
    m->body = parse_body({"endmacro"}, &found);
    loop_depth_ = saved;
    if (cur().type == Tok::Name) next();  // {% endmacro name %}
    expect_block_end();
    return m;
  }

  StmtPtr parse_call_block() {
    auto s = node<CallBlockStmt>();
    auto caller = node<MacroStmt>();
    caller->name = "caller";
    if (is_op("(")) caller = parse_macro_signature(std::move(caller));
    ExprPtr e = parse_expression(true);
    auto* call = dynamic_cast<CallExpr*>(e.get());
    if (!call) error("expected call");
    e.release();
    s->call.reset(call);
    expect_block_end();
    std::string found;
    int saved = loop_depth_;
    loop_depth_ = 0;
    caller->body = parse_body({"endcall"}, &found);
    loop_depth_ = saved;
    expect_block_end();
    s->caller = std::move(caller);
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = node<FilterBlockStmt>();
    s->filters.push_back(parse_filter_tail(nullptr));
    parse_filter_chain(s->filters);
    expect_block_end();
    std::string found;
    s->body = parse_body({"endfilter"}, &found);
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = node<WithStmt>();
    while (cur().type != Tok::BlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      Target t = parse_target(false);
      expect_op("=");
      s->assigns.emplace_back(std::move(t), parse_expression(true));
    }
    expect_block_end();
    std::string found;
    s->body = parse_body({"endwith"}, &found);
    expect_block_end();
    return s;
  }

  StmtPtr parse_generation() {
    auto s = node<BodyStmt>();
    expect_block_end();
    std::string found;
    s->body = parse_body({"endgeneration"}, &found);
    expect_block_end();
    return s;
  }

  // ---- expressions
  bool is_tuple_end(const std::vector<std::string>& extra_end) const {
    const Token& c = cur();
    if (c.type == Tok::VarEnd || c.type == Tok::BlockEnd || c.type == Tok::Eof) return true;
    if (c.type == Tok::Op && c.text == ")") return true;
    if (c.type == Tok::Name)
      return std::find(extra_end.begin(), extra_end.end(), c.text) != extra_end.end();
    return false;
  }

  ExprPtr parse_tuple(bool explicit_parens, bool with_condexpr, const std::vector<std::string>& extra_end) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      items.push_back(with_condexpr ? parse_expression(true) : parse_or());
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) error("expected an expression, got " + describe());
    }
    auto l = std::make_unique<ListExpr>();
    l->line = line;
    l->tuple = true;
    l->items = std::move(items);
    return l;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      auto c = node<CondExpr>();
      next();
      c->test = parse_or();
      if (skip_name("else")) c->otherwise = parse_expression(true);
      c->then = std::move(e);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int line) {
    auto b = std::make_unique<BinaryExpr>();
    b->line = line;
    b->op = std::move(op);
    b->left = std::move(l);
    b->right = std::move(r);
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      l = binary("or", std::move(l), parse_and(), line);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      l = binary("and", std::move(l), parse_not(), line);
    }
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      auto u = node<UnaryExpr>();
      next();
      u->op = "not";
      u->operand = parse_not();
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::pair<std::string, ExprPtr>> rest;
    while (true) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      rest.emplace_back(op, parse_math1());
    }
    if (rest.empty()) return first;
    auto c = std::make_unique<CompareExpr>();
    c->line = line;
    c->first = std::move(first);
    c->rest = std::move(rest);
    return c;
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      l = binary(op, std::move(l), parse_concat(), line);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      int line = cur().line;
      next();
      l = binary("~", std::move(l), parse_math2(), line);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      l = binary(op, std::move(l), parse_pow(), line);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      next();
      l = binary("**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this);
    ExprPtr n;
    if (is_op("-") || is_op("+")) {
      auto u = node<UnaryExpr>();
      u->op = cur().text;
      next();
      u->operand = parse_unary(false);
      n = std::move(u);
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  ExprPtr parse_primary() {
    const Token& c = cur();
    if (c.type == Tok::Name) {
      if (c.text == "true" || c.text == "True" || c.text == "false" || c.text == "False") {
        auto k = node<ConstExpr>();
        k->value = Value(c.text[0] == 't' || c.text[0] == 'T');
        next();
        return k;
      }
      if (c.text == "none" || c.text == "None") {
        auto k = node<ConstExpr>();
        k->value = Value(None{});
        next();
        return k;
      }
      auto n = node<NameExpr>();
      n->name = c.text;
      next();
      return n;
    }
    if (c.type == Tok::String) {
      auto k = node<ConstExpr>();
      std::string s;
      while (cur().type == Tok::String) {
        s += cur().text;
        next();
      }
      k->value = Value(s);
      return k;
    }
    if (c.type == Tok::Int || c.type == Tok::Float) {
      auto k = node<ConstExpr>();
      k->value = c.type == Tok::Int ? Value(c.ival) : Value(c.fval);
      next();
      return k;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true, {});
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      auto l = node<ListExpr>();
      next();
      while (!is_op("]")) {
        if (!l->items.empty()) expect_op(",");
        if (is_op("]")) break;
        l->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      auto d = node<DictExpr>();
      next();
      while (!is_op("}")) {
        if (!d->items.empty()) expect_op(",");
        if (is_op("}")) break;
        ExprPtr k = parse_expression(true);
        expect_op(":");
        d->items.emplace_back(std::move(k), parse_expression(true));
      }
      expect_op("}");
      return d;
    }
    error("unexpected " + describe());
  }

  ExprPtr parse_postfix(ExprPtr n) {
    while (true) {
      if (is_op(".")) {
        next();
        if (cur().type == Tok::Name) {
          auto a = node<GetAttrExpr>();
          a->attr = cur().text;
          next();
          a->obj = std::move(n);
          n = std::move(a);
        } else if (cur().type == Tok::Int) {
          auto g = node<GetItemExpr>();
          auto k = node<ConstExpr>();
          k->value = Value(cur().ival);
          next();
          g->obj = std::move(n);
          g->key = std::move(k);
          n = std::move(g);
        } else {
          error("expected name or number after '.'");
        }
      } else if (is_op("[")) {
        n = parse_subscript(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    int line = cur().line;
    next();  // [
    ExprPtr start;
    if (!is_op(":")) start = parse_expression(true);
    if (is_op(":")) {
      auto s = std::make_unique<SliceExpr>();
      s->line = line;
      s->obj = std::move(obj);
      s->start = std::move(start);
      next();
      if (!is_op("]") && !is_op(":")) s->stop = parse_expression(true);
      if (skip_op(":"))
        if (!is_op("]")) s->step = parse_expression(true);
      expect_op("]");
      return s;
    }
    if (is_op(",")) {  // tuple key
      auto l = std::make_unique<ListExpr>();
      l->line = line;
      l->tuple = true;
      l->items.push_back(std::move(start));
      while (skip_op(",")) {
        if (is_op("]")) break;
        l->items.push_back(parse_expression(true));
      }
      start = std::move(l);
    }
    expect_op("]");
    auto g = std::make_unique<GetItemExpr>();
    g->line = line;
    g->obj = std::move(obj);
    g->key = std::move(start);
    return g;
  }

  void parse_call_args(std::vector<ExprPtr>& args, KwArgs& kwargs) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("*args / **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string k = cur().text;
        next();
        next();
        kwargs.emplace_back(k, parse_expression(true));
      } else {
        if (!kwargs.empty()) error("positional argument after keyword argument");
        args.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = node<CallExpr>();
    c->callee = std::move(callee);
    parse_call_args(c->args, c->kwargs);
    return c;
  }

  std::unique_ptr<FilterExpr> parse_filter_tail(ExprPtr operand) {
    auto f = node<FilterExpr>();
    f->name = expect_name();
    while (is_op(".")) {
      next();
      f->name += "." + expect_name();
    }
    if (!has_filter(f->name)) error("no filter named '" + f->name + "'");
    if (is_op("(")) parse_call_args(f->args, f->kwargs);
    f->operand = std::move(operand);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr n) {
    while (true) {
      if (is_op("|")) {
        next();
        n = parse_filter_tail(std::move(n));
      } else if (is_name("is")) {
        next();
        n = parse_test(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n));
      } else {
        return n;
      }
    }
  }

  ExprPtr parse_test(ExprPtr operand) {
    auto t = node<TestExpr>();
    t->negated = skip_name("not");
    t->name = expect_name();
    if (!has_test(t->name)) error("no test named '" + t->name + "'");
    t->operand = std::move(operand);
    const Token& c = cur();
    if (is_op("(")) {
      KwArgs kw;
      parse_call_args(t->args, kw);
      if (!kw.empty()) error("keyword arguments to tests are not supported");
    } else if ((c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int || c.type == Tok::Float ||
                is_op("[") || is_op("{")) &&
               !(is_name("else") || is_name("or") || is_name("and"))) {
      if (is_name("is")) error("you cannot chain multiple tests with is");
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse_root(); }

}  // namespace vireo::tmpl
