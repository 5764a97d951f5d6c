// SPDX-License-Identifier: Apache-2.0
// Tar archives and byte streams: members read in order under ustar, GNU long-name and pax path
// records; a compressed member inflated on the fly; gzip of several members; a cut archive.
#include "importers/archive.hpp"
#include "importers/byte_stream.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace fs = std::filesystem;

std::string gzip(const std::string& text) {
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(compressBound(static_cast<uLong>(text.size())) + 64, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    zs.avail_in = static_cast<uInt>(text.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

// One 512-byte header (ustar, checksum filled in) and the member's padded content.
std::string entry(const std::string& name, const std::string& content, char type = '0') {
    std::string h(512, '\0');
    std::memcpy(h.data(), name.data(), std::min<std::size_t>(name.size(), 100));
    std::snprintf(h.data() + 100, 8, "%07o", 0644);
    std::snprintf(h.data() + 124, 12, "%011o", static_cast<unsigned>(content.size()));
    h[156] = type;
    std::memcpy(h.data() + 257,
                "ustar\0"
                "00",
                8);
    std::memset(h.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h.data() + 148, 8, "%06o", sum);
    std::string body = content;
    body.resize((content.size() + 511) / 512 * 512, '\0');
    return h + body;
}

std::string read_all(ByteStream& in) {
    std::string out;
    char buf[4096];
    for (;;) {
        auto got = in.read(buf, sizeof buf);
        EXPECT_TRUE(got.is_ok());
        if (!got.is_ok() || *got == 0) break;
        out.append(buf, *got);
    }
    return out;
}

class ArchiveTest : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = (fs::temp_directory_path() /
                 ("gpudiag_archive_" + std::to_string(::getpid()) + ".tar.gz"))
                    .string();
    }
    void TearDown() override { fs::remove(path_); }
    void write(const std::string& bytes) { std::ofstream(path_, std::ios::binary) << bytes; }
    std::string path_;
};

TEST_F(ArchiveTest, MembersUnderEveryNamingScheme) {
    const std::string long_name = std::string(130, 'd') + "/rank3.json";
    const std::string pax = "29 path=pax/rank4.trace.json\n";  // the length counts itself
    std::string tar = entry("job/", "", '5') + entry("job/rank0.json", "{\"traceEvents\": []}") +
                      entry("././@LongLink", long_name + '\0', 'L') + entry("ignored", "{}") +
                      entry("PaxHeaders/x", pax, 'x') + entry("short", "[]") +
                      entry("job/rank1.json.gz", gzip("{\"a\": 1}")) + std::string(1024, '\0');
    write(gzip(tar));
    auto in = open_content_stream(path_);
    ASSERT_TRUE(in.is_ok());
    TarReader reader(std::move(*in));
    std::vector<std::string> names;
    for (;;) {
        auto more = reader.next();
        ASSERT_TRUE(more.is_ok()) << more.status().to_string();
        if (!*more) break;
        names.push_back(reader.name());
    }
    EXPECT_EQ(names, (std::vector<std::string>{"job/rank0.json", long_name, "pax/rank4.trace.json",
                                               "job/rank1.json.gz"}));
    auto member = open_archive_member(path_, "job/rank1.json.gz");
    ASSERT_TRUE(member.is_ok());
    EXPECT_EQ(read_all(**member), "{\"a\": 1}");  // inflated as it is read
    auto missing = open_archive_member(path_, "nope");
    EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(ArchiveTest, ACutArchiveIsAnErrorOrAShortMemberNeverACrash) {
    std::string tar = entry("a.json", std::string(5000, 'x')) + entry("b.json", "{}");
    write(tar.substr(0, 700));
    auto in = open_content_stream(path_);
    ASSERT_TRUE(in.is_ok());
    TarReader reader(std::move(*in));
    auto first = reader.next();
    ASSERT_TRUE(first.is_ok());
    EXPECT_TRUE(*first);
    EXPECT_EQ(read_all(reader.member()).size(), 188u);
    EXPECT_TRUE(reader.member().truncated());
    auto second = reader.next();
    EXPECT_TRUE(!second.is_ok() || !*second);
}

TEST(ByteStream, GzipOfSeveralMembersAndCutStreams) {
    const std::string two = gzip("hello, ") + gzip("world");
    auto in = gzip_stream(memory_stream(two.data(), two.size()));
    EXPECT_EQ(read_all(*in), "hello, world");
    EXPECT_FALSE(in->truncated());
    const std::string whole = gzip(std::string(100000, 'z'));
    const std::string cut = whole.substr(0, whole.size() / 2);
    auto short_in = gzip_stream(memory_stream(cut.data(), cut.size()));
    EXPECT_LT(read_all(*short_in).size(), 100000u);
    EXPECT_TRUE(short_in->truncated());
    const std::string junk = "not gzip at all";
    auto bad = gzip_stream(memory_stream(junk.data(), junk.size()));
    char buf[16];
    EXPECT_EQ(bad->read(buf, sizeof buf).status().code(), StatusCode::kCorruptData);
}

}  // namespace
}  // namespace gpudiag::detail
