#include "lucid/config/options.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <sstream>

#include "lucid/util/error.h"

namespace lucid::config {

Options::Options(std::string command, std::vector<OptionSpec> specs)
    : command_(std::move(command)), specs_(std::move(specs)) {
  for (const auto& s : specs_) values_[s.key] = s.default_value;
}

bool Options::parse_or_help(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << help();
    return false;
  }
  parse(args);
  return true;
}

void Options::parse(const std::vector<std::string>& tokens) {
  for (const auto& tok : tokens) {
    auto eq = tok.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UserError("'" + tok + "': options are key=value (see lucid " + command_ + " --help)");
    auto key = tok.substr(0, eq);
    if (!values_.count(key)) throw UserError("unknown option '" + key + "' (see lucid " + command_ + " --help)");
    values_[key] = tok.substr(eq + 1);
    given_[key] = true;
  }
}

const std::string& Options::str(const std::string& key) const { return values_.at(key); }

long long Options::integer(const std::string& key) const {
  const auto& v = values_.at(key);
  try {
    size_t used = 0;
    long long x = std::stoll(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw UserError("option " + key + "=" + v + ": expected an integer");
}

long long Options::integer(const std::string& key, long long lo, long long hi) const {
  const long long x = integer(key);
  if (x < lo || x > hi)
    throw UserError("option " + key + "=" + values_.at(key) + ": expected an integer from " + std::to_string(lo) +
                    " to " + std::to_string(hi));
  return x;
}

double Options::number(const std::string& key) const {
  const auto& v = values_.at(key);
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size() && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  // NaN and infinity are refused here, for every command: no option means them, and they would
  // pass every range check written as a comparison.
  throw UserError("option " + key + "=" + v + ": expected a finite number");
}

bool Options::flag(const std::string& key) const {
  auto v = values_.at(key);
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  throw UserError("option " + key + "=" + values_.at(key) + ": expected True or False");
}

std::string Options::help() const {
  std::ostringstream o;
  o << "usage: lucid " << command_ << " [key=value ...]\n\noptions (default in brackets):\n";
  for (const auto& s : specs_) {
    std::string left = "  " + s.key + " [" + s.default_value + "]";
    o << left << std::string(left.size() < 34 ? 34 - left.size() : 1, ' ') << s.help << "\n";
  }
  return o.str();
}

}  // namespace lucid::config
