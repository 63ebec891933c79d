// Renders every case recorded from transformers (tools/reference/make_chat_template_fixtures.py)
// and compares byte for byte: the real chat templates of models/<name>/tokenizer_config.json, and
// small feature templates rendered by transformers' own Jinja environment.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "template/chat_template.h"

namespace {

using OJson = nlohmann::ordered_json;

OJson load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return OJson::parse(f);
}

std::string fixture(const std::string& name) { return std::string(VIREO_SOURCE_DIR) + "/tests/fixtures/template/" + name; }

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

// One-line description of the first difference, with some context either side.
std::string first_diff(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (want " << want.size() << " bytes, got " << got.size() << ")\n"
     << "  want: ..." << escape(want.substr(from, 100)) << "\n"
     << "  got:  ..." << escape(got.substr(from, 100));
  return os.str();
}

std::string token_or_empty(const OJson& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

TEST(TemplateFixtures, ModelChatTemplatesMatchTransformers) {
  OJson fx = load(fixture("chat_template_models.json"));
  std::map<std::string, OJson> cases;
  for (const auto& c : fx["cases"]) cases[c["id"].get<std::string>()] = c;
  std::map<std::string, std::unique_ptr<vireo::ChatTemplate>> templates;
  for (const auto& m : fx["models"]) {
    std::string model = m["model"];
    OJson cfg = load(std::string(VIREO_SOURCE_DIR) + "/models/" + model + "/tokenizer_config.json");
    const OJson& ct = cfg["chat_template"];
    std::string text;
    if (ct.is_string()) {
      text = ct.get<std::string>();
    } else {
      for (const auto& t : ct)
        if (t["name"] == m["name"]) text = t["template"];
    }
    ASSERT_FALSE(text.empty()) << model;
    templates[model] = std::make_unique<vireo::ChatTemplate>(text, token_or_empty(m["bos_token"]), token_or_empty(m["eos_token"]));
  }
  ASSERT_EQ(templates.size(), 4u) << "expected qwen3, llama3, deepseek_v3, gemma3";
  int checked = 0, errors = 0, mismatches = 0;
  for (const auto& r : fx["results"]) {
    std::string model = r["model"], case_id = r["case"], extra_id = r["extra"];
    const OJson& c = cases.at(case_id);
    vireo::ChatTemplateOptions opts;
    opts.add_generation_prompt = r["add_generation_prompt"].get<bool>();
    opts.tools = c["tools"];
    opts.extra_context = fx["extras"][extra_id];
    std::string label = model + "/" + case_id + "/agp=" + (opts.add_generation_prompt ? "1" : "0") + "/" + extra_id;
    ++checked;
    if (r.contains("error")) {
      ++errors;
      try {
        std::string got = templates[model]->apply(c["messages"], opts);
        ADD_FAILURE() << label << ": transformers raised " << r["error"]["type"] << " (" << r["error"]["message"]
                      << ") but we rendered: " << escape(got);
        ++mismatches;
      } catch (const vireo::Error& e) {
        if (r["error"]["type"] == "TemplateError")  // raise_exception(): the message must come through
          EXPECT_NE(std::string(e.what()).find(r["error"]["message"].get<std::string>()), std::string::npos)
              << label << ": " << e.what();
      }
      continue;
    }
    std::string want = r["output"];
    std::string got;
    try {
      got = templates[model]->apply(c["messages"], opts);
    } catch (const vireo::Error& e) {
      ADD_FAILURE() << label << ": threw " << e.what();
      ++mismatches;
      continue;
    }
    if (got != want) {
      ++mismatches;
      ADD_FAILURE() << label << ": " << first_diff(want, got);
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(checked - errors, 100);
  std::cout << "checked " << checked << " model renders (" << errors << " expected errors), " << mismatches
            << " mismatches\n";
}

TEST(TemplateFixtures, FeatureTemplatesMatchJinja2) {
  OJson fx = load(fixture("chat_template_features.json"));
  int checked = 0;
  for (const auto& f : fx["features"]) {
    std::string name = f["name"], text = f["template"];
    const OJson& ctx = f["context"];
    ++checked;
    vireo::ChatTemplateOptions opts;
    opts.add_generation_prompt = ctx.contains("add_generation_prompt") ? ctx["add_generation_prompt"].get<bool>() : false;
    opts.extra_context = ctx.is_object() ? ctx : OJson::object();
    OJson messages = ctx.contains("messages") ? ctx["messages"] : OJson::array();
    bool want_error = f.contains("error");
    std::string got;
    try {
      vireo::ChatTemplate t(text, "", "");
      got = t.apply(messages, opts);
    } catch (const vireo::Error& e) {
      if (!want_error) ADD_FAILURE() << name << ": threw " << e.what();
      else if (f["error"]["type"] == "TemplateSyntaxError")
        EXPECT_NE(std::string(e.what()).find("line "), std::string::npos) << name << ": " << e.what();
      else if (f["error"]["type"] == "TemplateError")
        EXPECT_NE(std::string(e.what()).find(f["error"]["message"].get<std::string>()), std::string::npos) << name;
      continue;
    }
    if (want_error) {
      ADD_FAILURE() << name << ": expected " << f["error"]["type"] << " (" << f["error"]["message"]
                    << "), rendered: " << escape(got);
      continue;
    }
    std::string want = f["output"];
    if (got != want) ADD_FAILURE() << name << ": " << first_diff(want, got);
  }
  EXPECT_GT(checked, 80);
}

}  // namespace
