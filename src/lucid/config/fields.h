// Options declared once. Each option of a command is one Field of its settings struct S: key,
// default, help, checks, and where its value goes (bindings into the components' own option
// structs, e.g. data::AugmentOptions::hsv_h). The command-line table (config::Options, --help, the
// nearest-key suggestion), the typed settings and the run record (args.yaml, checkpoint metadata)
// are all generated from that one list:
//
//   fields.number("hsv_h", "HSV hue gain").fraction().to(&S::loader, &LoaderOptions::aug,
//   &AugmentOptions::hsv_h);
//
// takes its default, 0.015, from AugmentOptions::hsv_h (kComponentDefault); a default given as text
// is for a value resolved at run time ("") or one no component holds.
//
// A field reads its text into S (parse, check, resolve a run-time default, store into every
// binding; errors name `key=value`), and writes back the value it resolved (the first binding),
// so a record holds what the run used, never an empty "default".
#pragma once
#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lucid/config/options.h"
#include "lucid/util/error.h"

namespace lucid::config {

// How an option stands to a training run's record (other commands keep the default).
enum class Role {
  Computation,  // what the run computes: in args.yaml and checkpoints; a resume keeps the run's value
  Adjustable,   // epochs, time, device: recorded; a resume may give a new value, which the record then holds
  Execution,    // how stages execute (capture_*, stage_times, gpu_augment): args.yaml only; a resume
                // takes it from its own command line
  Location,     // where the run lives (project, name, exist_ok, resume): args.yaml only
};

enum class ValueKind { Text, Integer, Number, Flag, Choice };

// Readers of one value; errors name `key=value` and what was expected.
long long read_integer(const std::string& key, const std::string& value, long long lo, long long hi);
double read_number(const std::string& key, const std::string& value);  // finite only
bool read_flag(const std::string& key, const std::string& value);      // True/False, true/false, 1/0, yes/no
// The shortest text that reads back as the same double, ".0" added to whole numbers (Python's repr).
std::string format_number(double v);
inline std::string format_flag(bool v) { return v ? "True" : "False"; }

// The default of a field declared without one: the value its first binding holds in a
// default-constructed S, i.e. the component's own default (as LibTorch's TORCH_ARG(double, eps) =
// 1e-5), written as the record writes it. Filled in by the field's first to().
inline constexpr const char* kComponentDefault = "\x01(the component's default)";

template <class S>
struct Field {
  OptionSpec spec;  // key, default as written on the command line ("" where resolved at run time), help
  ValueKind kind = ValueKind::Text;
  Role role = Role::Computation;
  std::vector<std::string> bad_values;               // values its checks refuse (for the declaration tests)
  std::function<void(S&, const std::string&)> read;  // parse, check, resolve, store into every binding
  std::function<std::string(const S&)> write;        // the resolved value, as the run record holds it
};

namespace detail {

// A chain of member pointers, applied left to right: (s.*a).*b ...
template <class S, class... M>
decltype(auto) member(S& s, M... path) {
  return (s.*....*path);
}

template <class S, class V>
struct Spec {
  std::string key;
  std::vector<std::function<void(S&, const V&)>> store;
  std::function<V(const S&)> load;
  std::function<V(const S&)> resolve;                                         // the value an empty text stands for
  std::vector<std::pair<std::function<bool(const V&)>, std::string>> checks;  // test, what it expects
  std::vector<std::function<V(const S&, V)>> adjust;  // after the checks (e.g. rounding up), in order
};

}  // namespace detail

// The fluent declaration of one field with value type V; it edits the Field in place.
template <class S, class V>
class FieldBuilder {
 public:
  FieldBuilder(Field<S>& field, std::shared_ptr<detail::Spec<S, V>> spec) : field_(field), spec_(std::move(spec)) {}

  // Where the value goes: a member of S, or a path of members into a component (&S::loader,
  // &LoaderOptions::aug, &AugmentOptions::hsv_h). Several calls bind several places; the first is
  // the one the record reads back.
  template <class... M>
  FieldBuilder& to(M... path) {
    spec_->store.push_back([=](S& s, const V& v) {
      auto& slot = detail::member(s, path...);
      slot = static_cast<std::remove_reference_t<decltype(slot)>>(v);
    });
    if (!spec_->load) spec_->load = [=](const S& s) { return static_cast<V>(detail::member(s, path...)); };
    if (field_.spec.default_value == kComponentDefault) field_.spec.default_value = field_.write(S{});
    return *this;
  }
  // A further place the value goes, computed from it (e.g. the layer list of freeze=).
  FieldBuilder& also(std::function<void(S&, const V&)> f) {
    spec_->store.push_back(std::move(f));
    return *this;
  }
  // An empty text stands for this value, computed from the fields declared before this one.
  FieldBuilder& resolve(std::function<V(const S&)> f) {
    spec_->resolve = std::move(f);
    return *this;
  }
  // Applied to the checked value before it is stored.
  FieldBuilder& adjust(std::function<V(const S&, V)> f) {
    spec_->adjust.push_back(std::move(f));
    return *this;
  }
  FieldBuilder& role(Role r) {
    field_.role = r;
    return *this;
  }
  // Values the field's reading refuses (for the declaration tests), where an adjust checks them.
  FieldBuilder& refuses(std::vector<std::string> bad) {
    field_.bad_values.insert(field_.bad_values.end(), bad.begin(), bad.end());
    return *this;
  }
  // A further check: values where `ok` is false are refused ("option key=text: " + `expected`);
  // `bad` are values it refuses, for the declaration tests.
  FieldBuilder& check(std::function<bool(const V&)> ok, std::string expected, std::vector<std::string> bad) {
    spec_->checks.push_back({std::move(ok), std::move(expected)});
    return refuses(std::move(bad));
  }

 protected:
  Field<S>& field_;
  std::shared_ptr<detail::Spec<S, V>> spec_;
};

template <class S>
class IntegerBuilder : public FieldBuilder<S, long long> {
 public:
  using FieldBuilder<S, long long>::FieldBuilder;
  // Values from lo to hi (both included).
  IntegerBuilder& range(long long lo, long long hi) {
    *lo_ = lo;
    *hi_ = hi;
    auto& bad = this->field_.bad_values;
    if (lo > std::numeric_limits<long long>::min()) bad.push_back(std::to_string(lo - 1));
    if (hi < std::numeric_limits<long long>::max()) bad.push_back(std::to_string(hi + 1));
    return *this;
  }
  std::shared_ptr<long long> lo_, hi_;
};

template <class S>
class NumberBuilder : public FieldBuilder<S, double> {
 public:
  using FieldBuilder<S, double>::FieldBuilder;
  // Bounds: inclusive, or exclusive where `open`.
  NumberBuilder& min(double lo, bool open = false) { return bound(lo, open, true); }
  NumberBuilder& max(double hi, bool open = false) { return bound(hi, open, false); }
  NumberBuilder& fraction() { return min(0).max(1); }  // [0, 1], as the reference's fraction keys

 private:
  NumberBuilder& bound(double b, bool open, bool lower) {
    this->check([=](const double& v) { return lower ? (open ? v > b : v >= b) : (open ? v < b : v <= b); },
                std::string("must be ") + (lower ? (open ? "above " : "at least ") : (open ? "below " : "at most ")) +
                    format_number(b),
                {format_number(open    ? b
                               : lower ? b - 1
                                       : b + 1)});
    return *this;
  }
};

// The fields of one command, in the order of --help and of the run record.
template <class S>
class FieldList {
 public:
  explicit FieldList(std::string command) : command_(std::move(command)) {}
  FieldList(const FieldList&) = delete;  // builders point into the list

  IntegerBuilder<S> integer(const std::string& key, const std::string& def, const std::string& help) {
    auto& f = add(key, def, help, ValueKind::Integer, {"1.5", "x"});
    auto spec = std::make_shared<detail::Spec<S, long long>>();
    spec->key = key;
    IntegerBuilder<S> b(f, spec);
    b.lo_ = std::make_shared<long long>(std::numeric_limits<long long>::min());
    b.hi_ = std::make_shared<long long>(std::numeric_limits<long long>::max());
    f.read = [spec, lo = b.lo_, hi = b.hi_](S& s, const std::string& text) {
      store(s, *spec, text, [&](const std::string& t) { return read_integer(spec->key, t, *lo, *hi); });
    };
    f.write = [spec](const S& s) { return std::to_string(spec->load(s)); };
    return b;
  }
  // The declarations without a default take the component's (kComponentDefault).
  IntegerBuilder<S> integer(const std::string& key, const std::string& help) {
    return integer(key, kComponentDefault, help);
  }
  NumberBuilder<S> number(const std::string& key, const std::string& help) {
    return number(key, kComponentDefault, help);
  }
  FieldBuilder<S, bool> flag(const std::string& key, const std::string& help) {
    return flag(key, kComponentDefault, help);
  }
  FieldBuilder<S, std::string> choice(const std::string& key, const std::string& help,
                                      std::vector<std::string> choices) {
    return choice(key, kComponentDefault, help, std::move(choices));
  }
  FieldBuilder<S, std::string> text(const std::string& key, const std::string& help) {
    return text(key, kComponentDefault, help);
  }

  NumberBuilder<S> number(const std::string& key, const std::string& def, const std::string& help) {
    auto& f = add(key, def, help, ValueKind::Number, {"nan", "inf", "x"});
    auto spec = std::make_shared<detail::Spec<S, double>>();
    spec->key = key;
    f.read = [spec](S& s, const std::string& text) {
      store(s, *spec, text, [&](const std::string& t) { return read_number(spec->key, t); });
    };
    f.write = [spec](const S& s) { return format_number(spec->load(s)); };
    return NumberBuilder<S>(f, spec);
  }
  FieldBuilder<S, bool> flag(const std::string& key, const std::string& def, const std::string& help) {
    auto& f = add(key, def, help, ValueKind::Flag, {"maybe"});
    auto spec = std::make_shared<detail::Spec<S, bool>>();
    spec->key = key;
    f.read = [spec](S& s, const std::string& text) {
      store(s, *spec, text, [&](const std::string& t) { return read_flag(spec->key, t); });
    };
    f.write = [spec](const S& s) { return format_flag(spec->load(s)); };
    return FieldBuilder<S, bool>(f, spec);
  }
  // One of `choices` (any letter case; stored and recorded as declared).
  FieldBuilder<S, std::string> choice(const std::string& key, const std::string& def, const std::string& help,
                                      std::vector<std::string> choices) {
    auto& f = add(key, def, help, ValueKind::Choice, {"no-such-" + key});
    auto spec = std::make_shared<detail::Spec<S, std::string>>();
    spec->key = key;
    f.read = [spec, choices](S& s, const std::string& text) {
      store(s, *spec, text, [&](const std::string& t) {
        for (const auto& c : choices)
          if (lower(c) == lower(t)) return c;
        std::string list;
        for (size_t i = 0; i < choices.size(); ++i)
          list += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
        throw UserError("option " + spec->key + "=" + t + ": expected " + list);
      });
    };
    f.write = [spec](const S& s) { return spec->load(s); };
    return FieldBuilder<S, std::string>(f, spec);
  }
  FieldBuilder<S, std::string> text(const std::string& key, const std::string& def, const std::string& help) {
    auto& f = add(key, def, help, ValueKind::Text, {});
    auto spec = std::make_shared<detail::Spec<S, std::string>>();
    spec->key = key;
    f.read = [spec](S& s, const std::string& t) { store(s, *spec, t, [](const std::string& v) { return v; }); };
    f.write = [spec](const S& s) { return spec->load(s); };
    return FieldBuilder<S, std::string>(f, spec);
  }

  // A value of any other type: `parse` turns the text into it (throwing UserError naming `key=text`),
  // `format` writes it back for the record; `bad` are texts parse refuses, for the tests.
  template <class V>
  FieldBuilder<S, V> value(const std::string& key, const std::string& def, const std::string& help,
                           std::function<V(const std::string& key, const std::string& text)> parse,
                           std::function<std::string(const V&)> format, std::vector<std::string> bad) {
    auto& f = add(key, def, help, ValueKind::Text, std::move(bad));
    auto spec = std::make_shared<detail::Spec<S, V>>();
    spec->key = key;
    f.read = [spec, parse](S& s, const std::string& text) {
      store(s, *spec, text, [&](const std::string& t) { return parse(spec->key, t); });
    };
    f.write = [spec, format](const S& s) { return format(spec->load(s)); };
    return FieldBuilder<S, V>(f, spec);
  }

  // A check across fields, run once every field is read (e.g. an option another one rules out);
  // it throws UserError naming the options.
  void cross_check(std::function<void(const S&)> check) { cross_checks_.push_back(std::move(check)); }

  const std::string& command() const { return command_; }
  const std::deque<Field<S>>& fields() const { return fields_; }
  const Field<S>* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.spec.key == key) return &f;
    return nullptr;
  }
  // The command-line table: every key with its default and help.
  Options options() const {
    std::vector<OptionSpec> specs;
    for (const auto& f : fields_) {
      if (f.spec.default_value == kComponentDefault)
        throw std::logic_error("option " + f.spec.key + " takes its component's default but is bound to nothing");
      specs.push_back(f.spec);
      specs.back().boolean = f.kind == ValueKind::Flag;
    }
    return Options(command_, std::move(specs));
  }
  // The typed settings of parsed options: every field read in declaration order.
  S read(const Options& options) const {
    S s{};
    for (const auto& f : fields_) f.read(s, options.str(f.spec.key));
    for (const auto& check : cross_checks_) check(s);
    return s;
  }

 private:
  static std::string lower(std::string v) {
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return v;
  }

  template <class V, class Parse>
  static void store(S& s, const detail::Spec<S, V>& spec, const std::string& text, Parse parse) {
    V v = text.empty() && spec.resolve ? spec.resolve(s) : parse(text);
    for (const auto& [ok, expected] : spec.checks)
      if (!ok(v)) throw UserError("option " + spec.key + "=" + text + ": " + expected);
    for (const auto& a : spec.adjust) v = a(s, v);
    for (const auto& put : spec.store) put(s, v);
    if (spec.store.empty()) throw std::logic_error("option " + spec.key + " is bound to nothing");
  }

  Field<S>& add(const std::string& key, const std::string& def, const std::string& help, ValueKind kind,
                std::vector<std::string> bad) {
    if (find(key)) throw std::logic_error("option " + key + " is declared twice");
    fields_.push_back(Field<S>{{key, def, help}, kind, Role::Computation, std::move(bad), nullptr, nullptr});
    return fields_.back();
  }

  std::string command_;
  std::deque<Field<S>> fields_;
  std::vector<std::function<void(const S&)>> cross_checks_;  // a deque: builders keep references to its elements
};

}  // namespace lucid::config
