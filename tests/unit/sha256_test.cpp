#include "lucid/util/sha256.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

using lucid::util::Sha256;
using lucid::util::sha256_hex;

// FIPS 180-2, appendix B: one block, two blocks (448-bit message), one million 'a'.
TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// Any split into update calls, across block boundaries, gives the one-shot digest.
TEST(Sha256, SplitUpdatesMatchOneShot) {
  std::string msg;
  for (int i = 0; i < 300; ++i) msg += static_cast<char>((i * 131 + 7) & 0xff);
  const auto whole = sha256_hex(msg);
  for (size_t chunk : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 128u, 299u}) {
    Sha256 h;
    for (size_t at = 0; at < msg.size(); at += chunk) h.update(msg.data() + at, std::min(chunk, msg.size() - at));
    EXPECT_EQ(h.hex_digest(), whole) << "chunk " << chunk;
  }
  EXPECT_NE(sha256_hex(msg.substr(1)), whole);
}

TEST(Sha256, SpentObjectRefusesMoreInput) {
  Sha256 h;
  h.update("abc").digest();
  EXPECT_THROW(h.update("d"), std::logic_error);
  EXPECT_THROW(h.digest(), std::logic_error);
}
