// Bounded random mutation of valid inputs, for the fuzz tests of every reader of user files.
#pragma once
#include <random>
#include <string>

namespace lucid::testing {

inline std::string mutate(std::string s, std::mt19937& rng, const std::string& alphabet) {
  auto pick = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 7) {
      case 0:  // replace a byte
        if (!s.empty()) s[pick(s.size())] = alphabet[pick(alphabet.size())];
        break;
      case 1:  // insert a byte
        s.insert(s.begin() + long(pick(s.size() + 1)), alphabet[pick(alphabet.size())]);
        break;
      case 2:  // delete a range
        if (!s.empty()) {
          size_t a = pick(s.size());
          s.erase(a, 1 + pick(8));
        }
        break;
      case 3:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 4:  // duplicate a range
        if (!s.empty()) {
          size_t a = pick(s.size());
          s.insert(pick(s.size()), s.substr(a, 1 + pick(40)));
        }
        break;
      case 5:  // flip bits
        if (!s.empty()) s[pick(s.size())] ^= char(1 << (rng() % 8));
        break;
      default:  // random byte anywhere
        if (!s.empty()) s[pick(s.size())] = char(rng() % 256);
        break;
    }
  }
  return s;
}

}  // namespace lucid::testing
