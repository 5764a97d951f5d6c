// SPDX-License-Identifier: Apache-2.0
// What keeps large snapshots fast and bounded: the compact trace kept between the importer's
// passes, the per-address maps, stacks condensed in the reader's memo, and gzip'ed input read as
// it inflates.
#include <gpudiag/analyze.hpp>

#include "corpus.hpp"
#include "importers/byte_stream.hpp"
#include "importers/torch_snapshot/address_map.hpp"
#include "importers/torch_snapshot/compact_trace.hpp"
#include "importers/torch_snapshot/torch_snapshot.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {
namespace {

TEST(CompactTrace, EntriesComeBackAsTheyWentIn) {
    std::mt19937_64 rng(7);
    std::vector<TraceEntry> in;
    const std::uint64_t extremes[] = {0, 1, 0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull};
    for (int i = 0; i < 200000; ++i) {
        TraceEntry e;
        e.action =
            static_cast<TraceAction>(rng() % (static_cast<unsigned>(TraceAction::kOther) + 1));
        e.device = static_cast<std::uint16_t>(rng() % 3 == 0 ? rng() % 8 : 0);
        // Times and addresses go back as well as forward, by small and by huge steps.
        e.time_us = i % 97 == 0 ? extremes[rng() % 4] : 1700000000000000ull + rng() % 100000;
        e.address = i % 89 == 0 ? extremes[rng() % 4] : 0x7f0000000000ull + (rng() % 4096) * 512;
        e.size = i % 83 == 0 ? extremes[rng() % 4] : rng() % (1ull << 30);
        e.stream = rng() % 4 == 0 ? rng() : 0;
        e.device_free = e.action == TraceAction::kOom ? rng() : 0;
        e.site = rng() % 2 == 0 ? static_cast<StringId>(rng() % 100000) : kNoString;
        e.category = static_cast<MemoryCategory>(rng() % 5);
        in.push_back(e);
    }
    CompactTrace kept;
    for (const TraceEntry& e : in) ASSERT_TRUE(kept.append(e, std::size_t{1} << 30));
    EXPECT_EQ(kept.entries(), in.size());
    // Far less than the 64 bytes of a TraceEntry, though these are noisier than real ones.
    EXPECT_LT(kept.bytes(), in.size() * 32);
    CompactTrace::Reader reader(kept);
    TraceEntry out;
    for (const TraceEntry& e : in) {
        ASSERT_TRUE(reader.next(out));
        ASSERT_EQ(out.action, e.action);
        ASSERT_EQ(out.device, e.device);
        ASSERT_EQ(out.time_us, e.time_us);
        ASSERT_EQ(out.address, e.address);
        ASSERT_EQ(out.size, e.size);
        ASSERT_EQ(out.stream, e.stream);
        ASSERT_EQ(out.device_free, e.device_free);
        ASSERT_EQ(out.site, e.site);
        ASSERT_EQ(out.category, e.category);
    }
    EXPECT_FALSE(reader.next(out));
}

TEST(CompactTrace, RefusesPastItsCap) {
    CompactTrace kept;
    TraceEntry e;
    e.address = 0x7f0000000000ull;
    std::size_t appended = 0;
    while (kept.append(e, std::size_t{4} << 20)) ++appended;
    EXPECT_GT(appended, 100000u);
    EXPECT_LE(kept.bytes(), std::size_t{4} << 20);
    EXPECT_EQ(kept.entries(), appended);
}

TEST(AddressMap, AgreesWithAHashMapThroughChurn) {
    std::mt19937_64 rng(11);
    AddressMap<std::uint64_t> map;
    std::unordered_map<std::uint64_t, std::uint64_t> reference;
    for (int i = 0; i < 300000; ++i) {
        // Few distinct addresses (512-aligned, 0 included), so inserts and erases collide.
        const std::uint64_t key = (rng() % 5000) * 512;
        switch (rng() % 3) {
            case 0: {
                auto [value, fresh] = map.try_emplace(key);
                ASSERT_EQ(fresh, reference.count(key) == 0);
                *value = i;
                reference[key] = i;
                break;
            }
            case 1: ASSERT_EQ(map.erase(key), reference.erase(key) == 1); break;
            default: {
                const std::uint64_t* found = map.find(key);
                auto it = reference.find(key);
                ASSERT_EQ(found != nullptr, it != reference.end());
                if (found != nullptr) {
                    ASSERT_EQ(*found, it->second);
                }
            }
        }
        ASSERT_EQ(map.size(), reference.size());
    }
    std::size_t seen = 0;
    map.for_each([&](std::uint64_t key, std::uint64_t value) {
        ASSERT_EQ(reference.at(key), value);
        ++seen;
    });
    EXPECT_EQ(seen, reference.size());
}

// A snapshot pickle as Python's pickler writes one (protocol 4, memo on every string, dict and
// list): no segments, one device trace of `entries` allocations, each with a frame list of its
// own made of `frames` frame dicts that every list shares.
std::string trace_pickle(int entries, int frames) {
    std::string p = "\x80\x04";
    std::uint32_t memo = 0;
    auto memoize = [&] {
        p += '\x94';
        return memo++;
    };
    auto get = [&](std::uint32_t index) {
        p += 'j';
        for (int i = 0; i < 4; ++i) p += static_cast<char>((index >> (8 * i)) & 0xFF);
    };
    auto str = [&](const std::string& s) {
        p += '\x8c';
        p += static_cast<char>(s.size());
        p += s;
        return memoize();
    };
    auto int4 = [&](std::uint32_t v) {
        p += 'J';
        for (int i = 0; i < 4; ++i) p += static_cast<char>((v >> (8 * i)) & 0xFF);
    };
    p += '}';
    memoize();
    p += '(';
    str("segments");
    p += ']';
    memoize();
    str("device_traces");
    p += ']';
    memoize();
    p += ']';  // device 0's trace
    memoize();
    std::uint32_t key_action = 0, key_addr = 0, key_size = 0, key_frames = 0, alloc = 0;
    std::vector<std::uint32_t> frame_dicts;
    for (int b = 0; b < entries; b += 1000) {
        p += '(';
        for (int i = b; i < std::min(entries, b + 1000); ++i) {
            p += '}';
            memoize();
            p += '(';
            if (i == 0) {
                key_action = str("action");
                alloc = str("alloc");
                key_addr = str("addr");
                int4(static_cast<std::uint32_t>(i) * 512);
                key_size = str("size");
                int4(512);
                key_frames = str("frames");
            } else {
                get(key_action);
                get(alloc);
                get(key_addr);
                int4(static_cast<std::uint32_t>(i) * 512);
                get(key_size);
                int4(512);
                get(key_frames);
            }
            p += ']';
            memoize();
            p += '(';
            for (int f = 0; f < frames; ++f) {
                if (i == 0) {
                    p += '}';
                    frame_dicts.push_back(memoize());
                    p += '(';
                    str("filename");
                    str("/home/u/train_" + std::to_string(f) + ".py");
                    str("name");
                    str("step");
                    str("line");
                    int4(static_cast<std::uint32_t>(f) + 1);
                    p += 'u';
                } else {
                    get(frame_dicts[static_cast<std::size_t>(f)]);
                }
            }
            p += 'e';  // the frame list
            p += 'u';  // the entry
        }
        p += 'e';  // the batch into the trace
    }
    p += 'a';  // the trace into device_traces
    p += 'u';  // the root's items
    p += '.';
    return p;
}

class Counter final : public SnapshotVisitor {
public:
    Status on_segment(SnapshotSegment&) override { return Status::ok(); }
    Status on_trace_entry(const TraceEntry& e) override {
        ++entries;
        if (e.site != kNoString) ++with_site;
        site = e.site;
        return Status::ok();
    }
    Status on_annotation(const SnapshotAnnotation&) override { return Status::ok(); }
    void on_setting(const std::string&, const std::string&) override {}
    std::uint64_t entries = 0;
    std::uint64_t with_site = 0;
    StringId site = kNoString;
};

// Every allocation's frame list stays in the pickle's memo (a free could refer back to it). The
// reader condenses each to 8 bytes once it is read, so the memory a trace takes grows by the
// memo's entries, not by the frames they hold: 200 000 lists of 16 frames fit in 16 MiB here,
// which the lists themselves (over 60 MiB as decoded values) would not.
TEST(TorchSnapshotReader, FrameListsAreCondensedSoLongTracesStayBounded) {
    const std::string bytes = trace_pickle(200000, 16);
    PickleLimits limits;
    limits.max_live_bytes = 16u << 20;
    StringTable strings;
    Counter counter;
    TorchSnapshotReader reader(limits);
    const Status s = reader.read_bytes(bytes, "trace.pickle", strings, counter);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(counter.entries, 200000u);
    EXPECT_EQ(counter.with_site, 200000u);  // every list summarized (to the same site)
    EXPECT_EQ(strings.lookup(counter.site), "u/train_0.py:1 step");
}

// Everything a reader hands over, in order, as text.
class Transcript final : public SnapshotVisitor {
public:
    explicit Transcript(const StringTable& strings) : strings_(strings) {}
    Status on_segment(SnapshotSegment& s) override {
        out << "seg " << s.device << ' ' << s.address << ' ' << s.total_size << ' '
            << strings_.lookup(s.site) << ' ' << s.blocks.size() << '\n';
        for (const auto& b : s.blocks) {
            out << " blk " << b.address << ' ' << b.size << ' ' << b.requested << ' '
                << static_cast<int>(b.state) << ' ' << strings_.lookup(b.site) << '\n';
        }
        return Status::ok();
    }
    Status on_trace_entry(const TraceEntry& e) override {
        out << "ent " << static_cast<int>(e.action) << ' ' << e.address << ' ' << e.size << ' '
            << e.time_us << ' ' << strings_.lookup(e.site) << ' ' << static_cast<int>(e.category)
            << '\n';
        return Status::ok();
    }
    Status on_annotation(const SnapshotAnnotation& a) override {
        out << "ann " << a.time_us << ' ' << a.start << ' ' << strings_.lookup(a.name) << '\n';
        return Status::ok();
    }
    void on_setting(const std::string& k, const std::string& v) override {
        out << "set " << k << '=' << v << '\n';
    }
    std::ostringstream out;

private:
    const StringTable& strings_;
};

// A stream that hands out a few bytes at a time (1 to 13), so that every opcode and value can
// straddle two pieces of the reader's buffer.
class PieceStream final : public ByteStream {
public:
    explicit PieceStream(std::string bytes) : bytes_(std::move(bytes)) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        const std::size_t take = std::min({n, bytes_.size() - at_, 1 + at_ % 13});
        std::memcpy(dst, bytes_.data() + at_, take);
        at_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return at_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return bytes_.size(); }

private:
    std::string bytes_;
    std::size_t at_ = 0;
};

// Hands out `bytes` in pieces of 1 to 13 bytes, then fails (when `fail` is set) or ends.
class FailingStream final : public ByteStream {
public:
    FailingStream(std::string bytes, bool fail) : bytes_(std::move(bytes)), fail_(fail) {}
    Result<std::size_t> read(char* dst, std::size_t n) override {
        if (at_ == bytes_.size()) {
            if (fail_) return io_error("disk gone");
            return std::size_t{0};
        }
        const std::size_t take = std::min({n, bytes_.size() - at_, 1 + at_ % 13});
        std::memcpy(dst, bytes_.data() + at_, take);
        at_ += take;
        return take;
    }
    [[nodiscard]] std::uint64_t consumed() const noexcept override { return at_; }
    [[nodiscard]] std::uint64_t total() const noexcept override { return bytes_.size(); }

private:
    std::string bytes_;
    bool fail_;
    std::size_t at_ = 0;
};

TEST(ReadAheadStream, GivesTheSameBytesThenTheSameEnd) {
    std::mt19937_64 rng(3);
    std::string bytes(5'300'000, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (bool fail : {false, true}) {
        auto ahead = read_ahead_stream(std::make_unique<FailingStream>(bytes, fail));
        EXPECT_EQ(ahead->total(), bytes.size());
        std::string out;
        std::vector<char> piece(70'000);
        Status end = Status::ok();
        for (;;) {
            auto got = ahead->read(piece.data(), 1 + rng() % piece.size());
            if (!got) {
                end = got.status();
                break;
            }
            if (*got == 0) break;
            out.append(piece.data(), *got);
        }
        EXPECT_TRUE(out == bytes) << "fail=" << fail << ": " << out.size() << " bytes";
        EXPECT_EQ(end.code(), fail ? StatusCode::kIoError : StatusCode::kOk);
        EXPECT_EQ(ahead->consumed(), bytes.size());
    }
}

TEST(TorchSnapshotReader, TinyPiecesReadAsTheWholeFile) {
    for (const char* name : {"decomfl_memory.pickle", "bcrafton_cs336a2_memory_snapshot.pickle"}) {
        const std::string path = testing::corpus_snapshot(name);
        if (!std::filesystem::exists(path)) GTEST_SKIP() << "corpus absent: " << path;
        std::ifstream in(path, std::ios::binary);
        std::ostringstream all;
        all << in.rdbuf();
        StringTable strings;
        Transcript whole(strings), pieces(strings);
        TorchSnapshotReader reader;
        ASSERT_TRUE(reader.read_bytes(all.str(), name, strings, whole).is_ok());
        PieceStream stream(all.str());
        const Status s =
            reader.read_stream(stream, SafePickleReader::kUnknownSize, name, strings, pieces);
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        EXPECT_EQ(reader.bytes_read(), all.str().size());
        EXPECT_GT(whole.out.str().size(), 100000u) << name;
        EXPECT_EQ(whole.out.str(), pieces.out.str()) << name;
    }
}

std::string gzip_copy(const std::string& from, const std::string& to, std::size_t keep = 0) {
    std::ifstream in(from, std::ios::binary);
    std::ostringstream all;
    all << in.rdbuf();
    std::string text = all.str();
    gzFile f = gzopen(to.c_str(), "wb6");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    if (keep != 0) std::filesystem::resize_file(to, keep);
    return to;
}

double figure(const Report& r, const char* key) {
    const Section* s = r.section("memory");
    const Figure* f = s != nullptr ? s->figure(key) : nullptr;
    return f != nullptr ? f->value : -1;
}

TEST(TorchSnapshotReader, GzipSnapshotsReadAsTheyInflate) {
    const std::string plain = testing::corpus_snapshot("decomfl_memory.pickle");
    if (!std::filesystem::exists(plain)) GTEST_SKIP() << "corpus absent: " << plain;
    testing::TempDir dir("snapshot_gzip");
    const std::string gz = gzip_copy(plain, dir.file("decomfl.pickle.gz"));
    auto a = analyze_files({plain});
    auto b = analyze_files({gz});
    ASSERT_TRUE(a.is_ok()) << a.status().to_string();
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    for (const char* key : {"reserved_bytes", "allocated_requested_bytes", "free_bytes", "segments",
                            "peak_allocated_bytes"}) {
        EXPECT_EQ(figure(*a, key), figure(*b, key)) << key;
    }
    // Cut short: what came before the cut is read, and the report says the rest is missing.
    const std::string cut =
        gzip_copy(plain, dir.file("cut.pickle.gz"), std::filesystem::file_size(gz) / 2);
    auto c = analyze_files({cut});
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_TRUE(c->capture.truncated);
}

}  // namespace
}  // namespace gpudiag::detail
