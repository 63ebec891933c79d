// Tree-walking renderer: scopes, Python/jinja2 semantics for attribute and item access, calls,
// iteration, and the guards that keep a hostile template from hanging or exhausting memory.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace vireo::tmpl {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
};

class Interpreter {
 public:
  static constexpr int kMaxCallDepth = 100;
  static constexpr int64_t kMaxSteps = 2'000'000;         // loop iterations + calls + filters
  static constexpr size_t kMaxOutput = 32ull << 20;       // bytes of rendered text or of one string
  static constexpr size_t kMaxListSize = 1'000'000;       // elements of one list
  static constexpr int64_t kMaxRange = 100000;            // jinja2 sandbox's MAX_RANGE

  explicit Interpreter(std::shared_ptr<Scope> globals) : scope_(std::move(globals)) {}

  // Guards (defaults above; tests lower them).
  int64_t max_steps = kMaxSteps;
  size_t max_output = kMaxOutput;

  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v) { scope_->vars[name] = std::move(v); }
  void assign_target(const Target& t, const Value& v);
  Scope* find_scope(const std::string& name) const;

  Value getattr(const Value& obj, const std::string& name) const;
  Value getitem(const Value& obj, const Value& key) const;
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) const;
  Value call(const Value& fn, CallArgs& args);
  std::vector<Value> iterate(const Value& v) const;

  Flow render(const Body& body, std::string& out);
  void check_output(const std::string& out) const;
  void step();  // counts one unit of work against kMaxSteps

  // Runs `fn` in a fresh child scope of `parent` (default: the current scope), then restores.
  template <class F>
  auto with_scope(std::shared_ptr<Scope> parent, F&& fn) {
    auto saved = scope_;
    auto s = std::make_shared<Scope>();
    s->parent = parent ? std::move(parent) : saved;
    scope_ = s;
    struct Restore {
      Interpreter* in;
      std::shared_ptr<Scope> saved;
      ~Restore() { in->scope_ = std::move(saved); }
    } restore{this, saved};
    return fn();
  }
  const std::shared_ptr<Scope>& scope() const { return scope_; }

  struct CallDepthGuard {
    Interpreter& in;
    explicit CallDepthGuard(Interpreter& i);
    ~CallDepthGuard() { --in.call_depth_; }
  };

 private:
  std::shared_ptr<Scope> scope_;
  int call_depth_ = 0;
  int64_t steps_ = 0;
};

// builtins (filters.cc, tests.cc, methods.cc, globals.cc, ops.cc)
Value apply_filter(Interpreter& in, const std::string& name, Value v, CallArgs& args);
bool apply_test(Interpreter& in, const std::string& name, const Value& v, CallArgs& args);
Value get_method(const Value& obj, const std::string& name);  // undefined if none
void install_globals(Scope& s);
Value binary_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// `mapping_arg`: the right operand was a list or dict (Python then allows it to go unused).
std::string percent_format(const std::string& fmt, const std::vector<Value>& args, bool mapping_arg = false);

}  // namespace vireo::tmpl
