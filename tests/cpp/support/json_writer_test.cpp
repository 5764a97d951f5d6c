// SPDX-License-Identifier: Apache-2.0
// JsonWriter: strings escaped as RFC 8259 asks (and nothing else escaped), read back by simdjson.
#include "support/json_writer.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <string_view>

namespace gpudiag::detail {
namespace {

std::string written(std::string_view s) {
    std::string out;
    JsonWriter(out, false).value(s);
    return out;
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControlCharactersOnly) {
    using namespace std::string_literals;
    EXPECT_EQ(written("plain"), "\"plain\"");
    EXPECT_EQ(written(""), "\"\"");
    EXPECT_EQ(written("a\"b\\c"), "\"a\\\"b\\\\c\"");
    EXPECT_EQ(written("\n\r\t\b\f"), "\"\\n\\r\\t\\b\\f\"");
    EXPECT_EQ(written("x\x01y\x1f"s), "\"x\\u0001y\\u001f\"");
    EXPECT_EQ(written("\0"s), "\"\\u0000\"");
    EXPECT_EQ(written("void k<\xc2\xb5s>() /"), "\"void k<\xc2\xb5s>() /\"")
        << "UTF-8, '<', '>' and '/' pass as they are";
}

// Every byte below 0x80 between plain runs, read back to the same string.
TEST(JsonWriterTest, EveryAsciiCharacterRoundTrips) {
    std::string all;
    for (int c = 0; c < 0x80; ++c) {
        all += "ab";
        all += static_cast<char>(c);
    }
    std::string doc;
    JsonWriter(doc, false).begin_object().key(all).value(all).end_object();
    simdjson::dom::parser parser;
    simdjson::dom::object object;
    ASSERT_EQ(parser.parse(doc).get(object), simdjson::SUCCESS) << doc;
    ASSERT_EQ(object.size(), 1u);
    for (auto [key, value] : object) {
        EXPECT_EQ(key, all);
        std::string_view read;
        ASSERT_EQ(value.get(read), simdjson::SUCCESS);
        EXPECT_EQ(read, all);
    }
}

}  // namespace
}  // namespace gpudiag::detail
