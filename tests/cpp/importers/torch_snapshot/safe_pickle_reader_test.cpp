// SPDX-License-Identifier: Apache-2.0
// The safe pickle VM: every supported data opcode, rejection of every code opcode, limits.
#include "importers/torch_snapshot/safe_pickle_reader.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace gpudiag::detail {
namespace {

using K = PickleValue::Kind;

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}
std::string data(const char* name) {
    return std::string(GPUDIAG_TEST_DATA_DIR) + "/memory/" + name;
}

// Little helpers to hand-assemble pickles.
std::string le(std::uint64_t v, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
    return s;
}
std::string op(unsigned char c) {
    return std::string(1, static_cast<char>(c));
}
std::string short_str(const std::string& s) {
    return op(0x8c) + op(static_cast<unsigned char>(s.size())) + s;
}

Result<PickleRef> read(const std::string& bytes, PickleLimits limits = {}) {
    SafePickleReader r(limits);
    return r.read(bytes, "test.pickle");
}

TEST(SafePickleReader, EveryDataOpcodeHandAssembled) {
    std::string p = op(0x80) + op(4) + op(0x95) + le(0, 8);  // PROTO 4, FRAME
    p += op(']') + op(0x94);                                 // EMPTY_LIST, MEMOIZE (0)
    p += op('(');                                            // MARK
    p += op('N') + op(0x88) + op(0x89);                      // None, True, False
    p += op('J') + le(static_cast<std::uint32_t>(-5), 4);    // BININT -5
    p += op('K') + op(200) + op('M') + le(60000, 2);         // BININT1, BININT2
    p += op(0x8a) + op(1) + op(0xFF);                        // LONG1 -1
    p += op(0x8a) + op(8) + le(1ull << 62, 8);               // LONG1 2^62
    p += op(0x8b) + le(9, 4) + std::string(9, '\x01');       // LONG4 (> 64 bits)
    double two_and_half = 2.5;
    std::uint64_t bits;
    std::memcpy(&bits, &two_and_half, 8);
    std::string be;
    for (int i = 7; i >= 0; --i) be += static_cast<char>((bits >> (8 * i)) & 0xFF);
    p += op('G') + be;                                                 // BINFLOAT
    p += short_str("ab");                                              // SHORT_BINUNICODE
    p += op('X') + le(3, 4) + "cde";                                   // BINUNICODE
    p += op(0x8d) + le(1, 8) + "f";                                    // BINUNICODE8
    p += op('U') + op(1) + "g" + op('T') + le(1, 4) + "h";             // SHORT_BINSTRING, BINSTRING
    p += op('C') + op(1) + "\x01" + op('B') + le(1, 4) + "\x02";       // SHORT_BINBYTES, BINBYTES
    p += op(0x8e) + le(1, 8) + "\x03" + op(0x96) + le(1, 8) + "\x04";  // BINBYTES8, BYTEARRAY8
    p += op(')') + op('K') + op(1) + op(0x85);                         // EMPTY_TUPLE, TUPLE1
    p += op('K') + op(1) + op('K') + op(2) + op(0x86);                 // TUPLE2
    p += op('K') + op(1) + op('K') + op(2) + op('K') + op(3) + op(0x87);  // TUPLE3
    p += op('(') + op('K') + op(4) + op('t');                             // MARK ... TUPLE
    p += op('(') + op('K') + op(5) + op('l');                             // MARK ... LIST
    p += op('(') + short_str("k") + op('K') + op(6) + op('d');            // MARK ... DICT
    p += op('}') + short_str("a") + op('K') + op(7) + op('s');            // EMPTY_DICT, SETITEM
    p += op('q') + op(9);                                                 // BINPUT 9
    p += op('h') + op(9) + op('0');                                       // BINGET 9, POP
    p += op('r') + le(70000, 4) + op('j') + le(70000, 4) + op('0');       // LONG_BINPUT/GET, POP
    p += op('K') + op(8) + op('2');                                       // DUP -> 8, 8
    p += op('(') + op('K') + op(99) + op('1');                            // MARK 99 POP_MARK
    p += op('e');                                                         // APPENDS
    p += op('K') + op(9) + op('a');                                       // APPEND
    p += op('.');
    auto r = read(p);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const PickleValue& v = **r;
    ASSERT_EQ(v.kind(), K::kList);
    const auto& it = v.items();
    ASSERT_EQ(it.size(), 30u);
    EXPECT_EQ(it[0]->kind(), K::kNone);
    EXPECT_TRUE(it[1]->as_bool());
    EXPECT_FALSE(it[2]->as_bool());
    EXPECT_EQ(it[3]->as_int(), -5);
    EXPECT_EQ(it[4]->as_int(), 200);
    EXPECT_EQ(it[5]->as_int(), 60000);
    EXPECT_EQ(it[6]->as_int(), -1);
    EXPECT_EQ(it[7]->as_int(), std::int64_t{1} << 62);
    EXPECT_EQ(it[8]->kind(), K::kBigInt);
    EXPECT_EQ(it[9]->as_double(), 2.5);
    EXPECT_EQ(it[10]->as_string(), "ab");
    EXPECT_EQ(it[11]->as_string(), "cde");
    EXPECT_EQ(it[12]->as_string(), "f");
    EXPECT_EQ(it[13]->as_string(), "g");
    EXPECT_EQ(it[14]->as_string(), "h");
    EXPECT_EQ(it[15]->kind(), K::kBytes);
    EXPECT_EQ(it[18]->as_string(), "\x04");
    EXPECT_EQ(it[19]->kind(), K::kTuple);
    EXPECT_EQ(it[19]->size(), 0u);
    EXPECT_EQ(it[20]->size(), 1u);
    EXPECT_EQ(it[21]->size(), 2u);
    EXPECT_EQ(it[22]->size(), 3u);
    EXPECT_EQ(it[23]->kind(), K::kTuple);
    EXPECT_EQ(it[24]->kind(), K::kList);
    EXPECT_EQ(it[25]->int_at("k"), 6);
    EXPECT_EQ(it[26]->int_at("a"), 7);
    EXPECT_EQ(it[27]->as_int(), 8);
    EXPECT_EQ(it[28]->as_int(), 8);
    EXPECT_EQ(it[29]->as_int(), 9);
}

TEST(SafePickleReader, PythonPicklesOfEveryProtocol) {
    for (int p = 2; p <= 5; ++p) {
        std::string path = data(("datatypes_p" + std::to_string(p) + ".pickle").c_str());
        auto r = read(read_file(path));
        ASSERT_TRUE(r.is_ok()) << path << ": " << r.status().to_string();
        const PickleValue& v = **r;
        EXPECT_EQ(v.find("none")->kind(), K::kNone) << p;
        EXPECT_TRUE(v.find("true")->as_bool());
        EXPECT_EQ(v.int_at("small"), 7);
        EXPECT_EQ(v.int_at("neg"), -3);
        EXPECT_EQ(v.int_at("i16"), 40000);
        EXPECT_EQ(v.int_at("i32"), -2000000000);
        EXPECT_EQ(v.int_at("i64"), std::int64_t{1} << 60);
        EXPECT_EQ(v.find("big")->kind(), K::kBigInt);
        EXPECT_EQ(v.find("float")->as_double(), 2.5);
        EXPECT_EQ(v.string_at("str"), "h\xc3\xa9llo");
        EXPECT_EQ(v.string_at("long_str").size(), 300u);
        EXPECT_EQ(v.find("tuple4")->size(), 4u);
        // A shared (memoized) frame dict is the same object twice.
        const PickleValue* shared = v.find("shared");
        ASSERT_EQ(shared->size(), 2u);
        EXPECT_EQ(shared->items()[0].get(), shared->items()[1].get());
        EXPECT_EQ(shared->items()[0]->int_at("line"), 125);
    }
}

TEST(SafePickleReader, MaliciousPickleIsRejectedAndNothingRuns) {
    const char* marker = "/tmp/gpudiag_pwned_marker";
    std::remove(marker);
    for (const char* name :
         {"malicious.pickle", "malicious_p2.pickle", "malicious_nested.pickle"}) {
        auto r = read(read_file(data(name)));
        ASSERT_FALSE(r.is_ok()) << name;
        EXPECT_EQ(r.status().code(), StatusCode::kCorruptData) << name;
        const std::string& m = r.status().message();
        EXPECT_NE(m.find("GLOBAL"), std::string::npos) << m;  // STACK_GLOBAL or GLOBAL
        EXPECT_NE(m.find("at offset"), std::string::npos) << m;
        EXPECT_NE(m.find("Nothing in it was executed"), std::string::npos) << m;
    }
    EXPECT_FALSE(std::filesystem::exists(marker)) << "the payload ran";
}

TEST(SafePickleReader, EveryCodeOpcodeIsRejectedByName) {
    struct Case {
        unsigned char op;
        const char* name;
    };
    const Case cases[] = {{'c', "GLOBAL"},   {0x93, "STACK_GLOBAL"}, {'R', "REDUCE"},
                          {'b', "BUILD"},    {'i', "INST"},          {'o', "OBJ"},
                          {0x81, "NEWOBJ"},  {0x92, "NEWOBJ_EX"},    {0x82, "EXT1"},
                          {0x83, "EXT2"},    {0x84, "EXT4"},         {'P', "PERSID"},
                          {'Q', "BINPERSID"}};
    for (const auto& c : cases) {
        // A valid prefix (an int on the stack) then the opcode at offset 4.
        std::string p = op(0x80) + op(2) + op('K') + op(1) + op(c.op) + std::string(16, '\0') + ".";
        auto r = read(p);
        ASSERT_FALSE(r.is_ok()) << c.name;
        EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
        EXPECT_NE(r.status().message().find(std::string("opcode ") + c.name + " at offset 4"),
                  std::string::npos)
            << r.status().message();
    }
}

TEST(SafePickleReader, OtherUnsupportedOpcodesAreClearErrors) {
    for (unsigned char c : {static_cast<unsigned char>('I'), static_cast<unsigned char>(0x8f),
                            static_cast<unsigned char>(0x97), static_cast<unsigned char>(0xFE)}) {
        std::string p = op(0x80) + op(4) + op(c) + std::string(8, '\0') + ".";
        auto r = read(p);
        ASSERT_FALSE(r.is_ok());
        EXPECT_NE(r.status().message().find("offset 2"), std::string::npos) << r.status().message();
    }
}

TEST(SafePickleReader, MalformedInput) {
    EXPECT_EQ(read("").status().code(), StatusCode::kCorruptData);
    EXPECT_NE(read("hello").status().message().find("not a binary pickle"), std::string::npos);
    EXPECT_EQ(read(op(0x80) + op(1)).status().code(), StatusCode::kUnsupported);
    auto truncated = read(op(0x80) + op(4) + op('X') + le(100, 4) + "abc");
    EXPECT_EQ(truncated.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(truncated.status().message().find("declares 100 bytes, but only 3 follow"),
              std::string::npos)
        << truncated.status().message();
    auto cut = read(op(0x80) + op(4) + op(']') + op('('));
    EXPECT_NE(cut.status().message().find("ends early"), std::string::npos);
    // A length far past the file's end is refused before anything is allocated for it.
    for (const std::string& huge : {op('X') + le(0xFFFFFFFFu, 4), op(0x8d) + le(~0ull, 8),
                                    op(0x96) + le(1ull << 62, 8), op('B') + le(0x7FFFFFFFu, 4)}) {
        auto r = read(op(0x80) + op(4) + huge + "abc.");
        EXPECT_EQ(r.status().code(), StatusCode::kCorruptData) << r.status().message();
        EXPECT_NE(r.status().message().find("but only 4 follow"), std::string::npos)
            << r.status().message();
    }
    EXPECT_FALSE(read(op(0x80) + op(4) + op('a') + ".").is_ok());          // APPEND on empty stack
    EXPECT_FALSE(read(op(0x80) + op(4) + op('h') + op(3) + ".").is_ok());  // unknown memo entry
    EXPECT_FALSE(read(op(0x80) + op(4) + op('K') + op(1) + op('K') + op(2) + ".").is_ok());
    EXPECT_FALSE(read(op(0x80) + op(4) + op('e') + ".").is_ok());  // APPENDS without MARK
    auto self = read(read_file(data("self_referential.pickle")));
    ASSERT_FALSE(self.is_ok());
    EXPECT_NE(self.status().message().find("itself"), std::string::npos) << self.status().message();
}

TEST(SafePickleReader, LimitsAreEnforced) {
    // Depth: 100 nested lists against a limit of 64.
    std::string deep = op(0x80) + op(4);
    for (int i = 0; i < 100; ++i) deep += op(']');
    for (int i = 0; i < 99; ++i) deep += op('a');
    deep += ".";
    EXPECT_EQ(read(deep).status().code(), StatusCode::kResourceExhausted);
    PickleLimits small;
    small.max_string_bytes = 4;
    EXPECT_EQ(read(op(0x80) + op(4) + op('X') + le(5, 4) + "abcde.", small).status().code(),
              StatusCode::kResourceExhausted);
    small = {};
    small.max_container_items = 2;
    std::string three = op(0x80) + op(4) + op(']') + op('(') + op('K') + op(1) + op('K') + op(2) +
                        op('K') + op(3) + op('e') + ".";
    EXPECT_EQ(read(three, small).status().code(), StatusCode::kResourceExhausted);
    // Memory amplification: DUP-ing a list into a bigger list many times stays under the cap
    // only if the cap is generous.
    small = {};
    small.max_live_bytes = 64 * 1024;
    std::string many = op(0x80) + op(4) + op(']') + op('(');
    for (int i = 0; i < 5000; ++i) many += short_str("abcdefgh");
    many += op('e') + ".";
    EXPECT_EQ(read(many, small).status().code(), StatusCode::kResourceExhausted);
    EXPECT_TRUE(read(many).is_ok());
}

// Streams the items of the root list and keeps none of them.
class CountingHandler final : public PickleStreamHandler {
public:
    std::uint16_t root_tag() override { return 1; }
    std::uint16_t child_tag(std::uint16_t, std::string_view, std::size_t) override { return 0; }
    bool streams(std::uint16_t tag) override { return tag == 1; }
    Status on_item(std::uint16_t, std::size_t index, PickleView item) override {
        EXPECT_EQ(static_cast<std::size_t>(item.int_at("i")), index);
        ++items;
        return Status::ok();
    }
    std::size_t items = 0;
};

// Memo entries stored under any index, sparse or dense, in any order, stay reachable: here an
// index far ahead is stored first, the dense entries then grow past it, and both are fetched.
TEST(SafePickleReader, MemoIndicesAnywhereStayReachable) {
    std::string p = op(0x80) + op(4) + op(']') + op(0x94);      // the list is memo 0
    p += short_str("far") + op('r') + le(3001, 4) + op('0');    // LONG_BINPUT 3001, POP
    p += short_str("x") + op('r') + le(1u << 30, 4) + op('0');  // a hostile index
    for (std::uint32_t i = 1; i <= 4000; ++i) {                 // even indices up to 8000
        p += op('M') + le(i, 2) + op('r') + le(2 * i, 4) + op('0');
    }
    p += op('(');
    p += op('j') + le(3001, 4);
    p += op('j') + le(2500, 4);
    p += op('j') + le(1u << 30, 4);
    p += op('e') + op('.');
    auto r = read(p);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const auto& it = (*r)->items();
    ASSERT_EQ(it.size(), 3u);
    EXPECT_EQ(it[0]->as_string(), "far");
    EXPECT_EQ(it[1]->as_int(), 1250);
    EXPECT_EQ(it[2]->as_string(), "x");
}

TEST(SafePickleReader, StreamedItemsAreReleasedSoMemoryStaysBounded) {
    // 20000 memoized dicts, appended in batches of 1000 as Python's pickler does.
    std::string p = op(0x80) + op(4) + op(']') + op(0x94);
    for (int batch = 0; batch < 20; ++batch) {
        p += op('(');
        for (int i = 0; i < 1000; ++i) {
            p += op('}') + op(0x94) + short_str("i") + op('J') +
                 le(static_cast<std::uint32_t>(batch * 1000 + i), 4) + op('s');
        }
        p += op('e');
    }
    p += ".";
    PickleLimits limits;
    limits.max_live_bytes = 1 << 20;  // far less than 20000 dicts
    SafePickleReader reader(limits);
    CountingHandler h;
    auto r = reader.read(p, "stream.pickle", &h);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(h.items, 20000u);
    EXPECT_EQ((*r)->size(), 0u);
    // Without streaming the same input exceeds the cap.
    EXPECT_EQ(read(p, limits).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace gpudiag::detail
