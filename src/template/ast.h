// Syntax tree of a parsed template. Expressions evaluate to Values; statements append to the output.
// eval/exec are defined in eval_expr.cc and exec_stmt.cc.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace vireo::tmpl {

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Interpreter& in) const = 0;
};
using ExprPtr = std::unique_ptr<Expr>;
using KwArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct ConstExpr : Expr {
  Value value;
  Value eval(Interpreter& in) const override;
};
struct NameExpr : Expr {
  std::string name;
  Value eval(Interpreter& in) const override;
};
struct GetAttrExpr : Expr {
  ExprPtr obj;
  std::string attr;
  Value eval(Interpreter& in) const override;
};
struct GetItemExpr : Expr {
  ExprPtr obj, key;
  Value eval(Interpreter& in) const override;
};
struct SliceExpr : Expr {
  ExprPtr obj, start, stop, step;  // any of start/stop/step may be null
  Value eval(Interpreter& in) const override;
};
struct CallExpr : Expr {
  ExprPtr callee;
  std::vector<ExprPtr> args;
  KwArgs kwargs;
  Value eval(Interpreter& in) const override;
  Value eval_with_caller(Interpreter& in, Value caller) const;
};
struct FilterExpr : Expr {
  ExprPtr operand;  // null inside {% filter %} / {% set x | f %}: applied to the block's text
  std::string name;
  std::vector<ExprPtr> args;
  KwArgs kwargs;
  Value eval(Interpreter& in) const override;
  Value apply(Interpreter& in, Value v) const;
};
struct TestExpr : Expr {
  ExprPtr operand;
  std::string name;
  std::vector<ExprPtr> args;
  bool negated = false;
  Value eval(Interpreter& in) const override;
};
struct UnaryExpr : Expr {
  std::string op;  // "-", "+", "not"
  ExprPtr operand;
  Value eval(Interpreter& in) const override;
};
struct BinaryExpr : Expr {
  std::string op;  // + - * / // % ** ~ and or
  ExprPtr left, right;
  Value eval(Interpreter& in) const override;
};
struct CompareExpr : Expr {
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;  // == != < <= > >= in notin
  Value eval(Interpreter& in) const override;
};
struct CondExpr : Expr {
  ExprPtr test, then, otherwise;  // otherwise may be null: undefined
  Value eval(Interpreter& in) const override;
};
struct ListExpr : Expr {
  std::vector<ExprPtr> items;
  bool tuple = false;
  Value eval(Interpreter& in) const override;
};
struct DictExpr : Expr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
  Value eval(Interpreter& in) const override;
};

enum class Flow { Normal, Break, Continue };

struct Stmt {
  int line = 0;
  virtual ~Stmt() = default;
  virtual Flow exec(Interpreter& in, std::string& out) const = 0;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Assignment target: a name, a tuple of names, or namespace attribute `ns.attr`.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;
  std::string attr;  // non-empty: names[0].attr
};

struct TextStmt : Stmt {
  std::string text;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct OutputStmt : Stmt {
  ExprPtr expr;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct IfStmt : Stmt {
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct ForStmt : Stmt {
  Target target;
  ExprPtr iter, filter;
  Body body, otherwise;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct SetStmt : Stmt {
  Target target;
  ExprPtr value;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct SetBlockStmt : Stmt {
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct MacroStmt : Stmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  Flow exec(Interpreter& in, std::string& out) const override;
  Value make(Interpreter& in) const;  // the callable, closed over the current scope
};
struct CallBlockStmt : Stmt {
  std::unique_ptr<MacroStmt> caller;  // `caller` macro: params and body of the block
  std::unique_ptr<CallExpr> call;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct FilterBlockStmt : Stmt {
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct WithStmt : Stmt {
  std::vector<std::pair<Target, ExprPtr>> assigns;
  Body body;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct BodyStmt : Stmt {  // {% generation %}: renders its body in place
  Body body;
  Flow exec(Interpreter& in, std::string& out) const override;
};
struct LoopControlStmt : Stmt {
  bool is_break = false;
  Flow exec(Interpreter& in, std::string& out) const override;
};

}  // namespace vireo::tmpl
