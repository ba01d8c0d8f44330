// Reference-style `key=value` options. Each command declares its keys with defaults and help;
// unknown keys and malformed values are errors naming the key.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace lucid::config {

struct OptionSpec {
  std::string key;
  std::string default_value;
  std::string help;
};

class Options {
 public:
  Options(std::string command, std::vector<OptionSpec> specs);

  // Parses `key=value` tokens; throws UserError for unknown keys or tokens without '='.
  void parse(const std::vector<std::string>& tokens);

  const std::string& str(const std::string& key) const;
  long long integer(const std::string& key) const;
  double number(const std::string& key) const;
  bool flag(const std::string& key) const;
  bool given(const std::string& key) const { return given_.count(key) > 0; }

  std::string help() const;
  const std::vector<OptionSpec>& specs() const { return specs_; }
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::string command_;
  std::vector<OptionSpec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
};

}  // namespace lucid::config
