// SPDX-License-Identifier: Apache-2.0
// The Nsight Systems SQLite importer: on the two corpus exports (schemas 2.9 and 3.13) the events
// must hold exactly what direct SQL over the same tables says (counts, bytes, times), and agree
// with a peer tool's parse (pipit's CSVs); on databases built here, the layouts and contents real
// exports vary in (NVTX, missing columns and ENUM tables, text names, invalid UTF-8).
#include "importers/nsight/nsight_reader.hpp"

#include <gpudiag/analyze.hpp>

#include "corpus.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gpudiag::detail {
namespace {

namespace fs = std::filesystem;

using testing::corpus_nsight_export;

// One integer from direct SQL over a file.
std::int64_t sql_int(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, query.c_str(), -1, &stmt, nullptr), SQLITE_OK) << query;
    std::int64_t v = -1;
    if (sqlite3_step(stmt) == SQLITE_ROW) v = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return v;
}

void sql_exec(const std::string& path, const std::string& script) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    ASSERT_EQ(sqlite3_exec(db, script.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error != nullptr ? error : "");
    sqlite3_close(db);
}

struct Imported : EventSink {
    SourceInfo info;
    SourceSummary summary;
    std::vector<Event> events;
    const StringTable* strings = nullptr;
    void begin(const SourceInfo& i, const StringTable& s) override {
        info = i;
        strings = &s;
    }
    void consume(std::span<const Event> e) override {
        events.insert(events.end(), e.begin(), e.end());
    }
    void end(const SourceSummary& s) override { summary = s; }

    [[nodiscard]] std::vector<const Event*> of(EventKind k) const {
        std::vector<const Event*> out;
        for (const auto& e : events) {
            if (e.kind == k) out.push_back(&e);
        }
        return out;
    }
};

struct Loaded {
    StringTable strings;
    Imported sink;
    Status status;
};

void import(const std::string& path, Loaded& out) {
    auto reader = NsightReader::open(path);
    ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
    out.status = (*reader)->read(out.sink, out.strings);
}

std::uint64_t total_duration(const std::vector<const Event*>& events) {
    std::uint64_t sum = 0;
    for (const Event* e : events) sum += e->end_ns - e->start_ns;
    return sum;
}

class CorpusExport : public ::testing::TestWithParam<const char*> {};

TEST_P(CorpusExport, CountsBytesAndTimesEqualDirectSql) {
    const std::string path = corpus_nsight_export(GetParam());
    if (!fs::exists(path)) GTEST_SKIP() << "corpus file absent: " << path;
    Loaded l;
    import(path, l);
    ASSERT_TRUE(l.status.is_ok()) << l.status.to_string();
    const Imported& s = l.sink;

    const auto kernels = s.of(EventKind::kKernel);
    EXPECT_EQ(kernels.size(), sql_int(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
    EXPECT_EQ(total_duration(kernels),
              sql_int(path, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL"));
    const auto copies = s.of(EventKind::kMemcpy);
    EXPECT_EQ(copies.size(), sql_int(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    std::uint64_t bytes = 0;
    std::uint64_t pageable = 0;
    for (const Event* e : copies) {
        bytes += e->copy.bytes;
        if (e->copy.src_kind == MemoryKind::kPageable ||
            e->copy.dst_kind == MemoryKind::kPageable) {
            pageable += e->copy.bytes;
        }
    }
    EXPECT_EQ(bytes, sql_int(path, "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    EXPECT_EQ(total_duration(copies),
              sql_int(path, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    // Pageable by the export's own enumeration where it has one (3.x), by its values otherwise.
    const std::string pageable_kind =
        sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name = 'ENUM_CUDA_MEM_KIND'") > 0
            ? "(SELECT id FROM ENUM_CUDA_MEM_KIND WHERE name = 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE')"
            : "0";
    EXPECT_EQ(
        pageable,
        sql_int(path,
                "SELECT coalesce(sum(bytes), 0) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = " +
                    pageable_kind + " OR dstKind = " + pageable_kind));
    for (const char* table : {"CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                              "CUPTI_ACTIVITY_KIND_RUNTIME", "OSRT_API"}) {
        const bool present =
            sql_int(path, std::string("SELECT count(*) FROM sqlite_master WHERE name = '") + table +
                              "'") > 0;
        const std::int64_t rows =
            present ? sql_int(path, std::string("SELECT count(*) FROM ") + table) : 0;
        std::size_t got = 0;
        std::string t = table;
        if (t.find("MEMSET") != std::string::npos) got = s.of(EventKind::kMemset).size();
        if (t.find("SYNCHRONIZATION") != std::string::npos) got = s.of(EventKind::kSync).size();
        if (t.find("RUNTIME") != std::string::npos) got = s.of(EventKind::kApiCall).size();
        if (t == "OSRT_API") {
            for (const Event* e : s.of(EventKind::kRange))
                got += e->range.category == RangeCategory::kOsRuntime ? 1 : 0;
        }
        EXPECT_EQ(static_cast<std::int64_t>(got), rows) << table;
    }
    EXPECT_EQ(s.summary.events, s.events.size());
    EXPECT_TRUE(
        std::is_sorted(s.events.begin(), s.events.end(),
                       [](const Event& a, const Event& b) { return a.start_ns < b.start_ns; }));
    // The devices with CUDA (not the integrated adapters the 2022 laptop export also lists).
    EXPECT_EQ(
        static_cast<std::int64_t>(s.info.devices.size()),
        sql_int(path, "SELECT count(*) FROM TARGET_INFO_GPU WHERE totalMemory > 0 OR smCount > 0"));
    // Each GPU named as NVML names it: "GPU-<uuid>" (or none for Nsight's all-zero UUID) and
    // the PCI address with an 8-digit domain, as the database gives them otherwise.
    for (const DeviceInfo& d : s.info.devices) {
        if (!d.uuid.empty()) {
            EXPECT_EQ(d.uuid.rfind("GPU-", 0), 0u) << d.uuid;
            EXPECT_NE(d.uuid.find_first_not_of("GPU0-"), std::string::npos) << d.uuid;
            EXPECT_EQ(sql_int(path, "SELECT count(*) FROM TARGET_INFO_GPU WHERE uuid = '" +
                                        d.uuid.substr(4) + "'"),
                      1);
        }
        if (!d.pci_bus_id.empty()) {
            ASSERT_EQ(d.pci_bus_id.size(), 16u) << d.pci_bus_id;
            EXPECT_EQ(sql_int(path, "SELECT count(*) FROM TARGET_INFO_GPU WHERE busLocation = '" +
                                        d.pci_bus_id.substr(4) + "'"),
                      1);
        }
    }
    EXPECT_EQ(s.info.producer, "nsight-systems");
    EXPECT_NE(s.info.pid, 0u);
    EXPECT_GT(s.info.wall_clock_offset_ns, 0);
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusExport,
                         ::testing::Values("pipit_perlmutter-cloverleaf-cuda.sqlite",
                                           "extrap_con_kernel.sqlite"));

TEST(NsightImport, CloverLeafIsDiagnosedAsAKinetoTraceWouldBe) {
    const std::string path = corpus_nsight_export("pipit_perlmutter-cloverleaf-cuda.sqlite");
    if (!fs::exists(path)) GTEST_SKIP() << "corpus file absent";
    auto r = analyze_files({path});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    const Section* t = r->section("timeline");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->figure("kernels")->value, 1312);
    EXPECT_EQ(t->figure("pageable_copies")->value, 279);
    EXPECT_EQ(t->figure("pageable_bytes")->value,
              sql_int(path, "SELECT sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY"));
    EXPECT_EQ(t->figure("sync_calls")->value, 1312);  // every cudaDeviceSynchronize
    EXPECT_NE(r->finding("pageable_memcpy"), nullptr);
    EXPECT_EQ(r->source.rank, 0);  // PMI_RANK / SLURM_PROCID of the captured environment
    EXPECT_EQ(r->source.world_size, 1);
}

// pipit's own parse of the same run: Enter/Leave rows with ns timestamps.
std::vector<std::pair<std::uint64_t, std::uint64_t>> pipit_intervals(
    const std::string& csv, int ts_column, std::map<std::string, int>* names) {
    std::ifstream in(csv);
    std::string line;
    std::getline(in, line);  // header
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    while (std::getline(in, line)) {
        std::vector<std::string> cells;
        std::stringstream row(line);
        for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
        if (cells.size() <= static_cast<std::size_t>(ts_column) + 2) continue;
        const bool enter = std::find(cells.begin(), cells.end(), "Enter") != cells.end();
        if (!enter) continue;
        out.emplace_back(std::stoull(cells[static_cast<std::size_t>(ts_column)]),
                         std::stoull(cells[static_cast<std::size_t>(ts_column) + 2]));
        if (names != nullptr) ++(*names)[cells[0]];
    }
    std::sort(out.begin(), out.end());
    return out;
}

TEST(NsightImport, AgreesWithPipitsParseOfTheSameRun) {
    const std::string path = corpus_nsight_export("pipit_perlmutter-cloverleaf-cuda.sqlite");
    const std::string gpu_csv = corpus_nsight_export("pipit_cloverleaf_gpu_trace.csv");
    const std::string api_csv = corpus_nsight_export("pipit_cloverleaf-cuda_api_trace.csv");
    if (!fs::exists(path) || !fs::exists(gpu_csv) || !fs::exists(api_csv))
        GTEST_SKIP() << "corpus files absent";
    Loaded l;
    import(path, l);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> gpu;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> api;
    std::map<std::string, int> api_names;
    for (const auto& e : l.sink.events) {
        if (e.kind == EventKind::kKernel || e.kind == EventKind::kMemcpy)
            gpu.emplace_back(e.start_ns, e.end_ns);
        if (e.kind == EventKind::kApiCall) {
            api.emplace_back(e.start_ns, e.end_ns);
            ++api_names[std::string(l.strings.lookup(e.api.name))];
        }
    }
    std::sort(gpu.begin(), gpu.end());
    std::sort(api.begin(), api.end());
    // gpu_trace.csv: Name,streamId,type,bytes,Trace Type,Event Type,Timestamp (ns),_matching_event,
    // _matching_timestamp; cuda_api_trace.csv: Name,Process,Thread,Trace Type,Event Type,Timestamp.
    EXPECT_EQ(gpu, pipit_intervals(gpu_csv, 6, nullptr));
    std::map<std::string, int> pipit_names;
    EXPECT_EQ(api, pipit_intervals(api_csv, 5, &pipit_names));
    // pipit keeps the versioned entry points ("cudaMalloc_v3020"); gpudiag names calls by name.
    std::map<std::string, int> unversioned;
    for (const auto& [name, n] : pipit_names) unversioned[name.substr(0, name.rfind("_v"))] += n;
    EXPECT_EQ(api_names, unversioned);
}

// ---- databases built here -----------------------------------------------------------------------

class Built : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = (fs::temp_directory_path() /
                 ("gpudiag_nsight_" + std::to_string(::getpid()) + "_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".sqlite"))
                    .string();
        fs::remove(path_);
    }
    void TearDown() override { fs::remove(path_); }
    std::string path_;
};

// The 3.x layout, trimmed to what the importer reads, plus NVTX.
constexpr const char* kModernSchema = R"SQL(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.15.0');
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, totalMemory INTEGER, smCount INTEGER, uuid TEXT);
INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100', 85000000000, 132, 'GPU-1');
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34, 'NvtxMark', ''), (59, 'NvtxPushPopRange', ''),
  (60, 'NvtxStartEndRange', ''), (75, 'NvtxDomainCreate', '');
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
INSERT INTO StringIds VALUES (1, 'step 7'), (2, 'cudaLaunchKernel_v7000'), (3, 'gemm_kernel'), (4, 'pthread_mutex_lock');
INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) VALUES
  (0, NULL, 75, 'gpudiag', 281474993487872 + 5, 9),
  (100, 900, 59, 'ProfilerStep#3', 281474993487872 + 5, 0),
  (1000, 1900, 59, NULL, 281474993487872 + 5, 0),
  (1100, 1300, 59, 'forward', 281474993487872 + 5, 0),
  (1400, 1600, 60, 'fwd', 281474993487872 + 5, 9),
  (1700, NULL, 34, 'checkpoint', 281474993487872 + 5, 0),
  (1800, 1850, 59, 'my region', 281474993487872 + 5, 0);
UPDATE NVTX_EVENTS SET textId = 1 WHERE start = 1000;
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER,
  correlationId INTEGER, nameId INTEGER, returnValue INTEGER, callchainId INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1150, 1160, 0, 281474993487872 + 5, 11, 2, 0, NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER,
  gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, staticSharedMemory INTEGER,
  dynamicSharedMemory INTEGER, registersPerThread INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1170, 1250, 0, 7, 11, 281474993487872, 3, 3, 4, 2, 1, 128, 1, 1, 1024, 512, 32);
CREATE TABLE OSRT_API (start INTEGER, end INTEGER, eventClass INTEGER, globalTid INTEGER, nameId INTEGER,
  returnValue INTEGER, nestingLevel INTEGER, callchainId INTEGER);
INSERT INTO OSRT_API VALUES (1310, 1390, 27, 281474993487872 + 6, 4, 0, 0, NULL);
)SQL";

TEST_F(Built, NvtxRangesBecomeStepsPhasesAndMarks) {
    sql_exec(path_, kModernSchema);
    Loaded l;
    import(path_, l);
    ASSERT_TRUE(l.status.is_ok()) << l.status.to_string();
    std::map<std::string, const Event*> ranges;
    for (const Event* e : l.sink.of(EventKind::kRange))
        ranges[std::string(l.strings.lookup(e->range.name))] = e;
    ASSERT_EQ(ranges.size(), 6u);  // the domain's creation is no range
    EXPECT_EQ(ranges["ProfilerStep#3"]->range.category, RangeCategory::kStep);
    EXPECT_EQ(ranges["ProfilerStep#3"]->range.id, 3u);
    EXPECT_EQ(ranges["step 7"]->range.category, RangeCategory::kStep);  // named through textId
    EXPECT_EQ(ranges["step 7"]->range.id, 7u);
    EXPECT_EQ(ranges["forward"]->range.category, RangeCategory::kPhase);
    EXPECT_EQ(ranges["fwd"]->range.category, RangeCategory::kPhase);  // gpudiag's own domain
    EXPECT_EQ(ranges["my region"]->range.category, RangeCategory::kGeneric);
    EXPECT_EQ(ranges["pthread_mutex_lock"]->range.category, RangeCategory::kOsRuntime);
    EXPECT_EQ(ranges["step 7"]->thread, 5u);
    const auto marks = l.sink.of(EventKind::kAnnotation);
    ASSERT_EQ(marks.size(), 1u);
    EXPECT_EQ(l.strings.lookup(marks[0]->annotation.text), "checkpoint");
    const auto calls = l.sink.of(EventKind::kApiCall);
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(l.strings.lookup(calls[0]->api.name), "cudaLaunchKernel");
    EXPECT_EQ(calls[0]->api.domain, ApiDomain::kRuntime);
    const auto kernels = l.sink.of(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0]->kernel.grid_size, 8u);
    EXPECT_EQ(kernels[0]->kernel.block_size, 128u);
    EXPECT_EQ(kernels[0]->kernel.shared_bytes, 1536u);
    EXPECT_EQ(kernels[0]->stream, 7u);
    EXPECT_EQ(kernels[0]->process, 1u);
    ASSERT_EQ(l.sink.info.devices.size(), 1u);
    EXPECT_EQ(l.sink.info.devices[0].name, "NVIDIA H100");
    EXPECT_EQ(l.sink.info.property("nsys_export_schema"), "3.15.0");

    // The timeline reads the steps: one step from ProfilerStep#3, one from "step 7".
    auto r = analyze_files({path_});
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->section("timeline")->figure("steps")->value, 2);
}

TEST_F(Built, OldLayoutsWithoutEnumsOrSomeColumnsAndWithTextNames) {
    sql_exec(path_, R"SQL(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  correlationId INTEGER, globalPid INTEGER, name TEXT, gridX INTEGER, blockX INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 3, 1, 0, 'old_kernel', 5, 64), (NULL, 5, 0, 3, 2, 0, 'no_start', 1, 1);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  correlationId INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER, dstKind INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (30, 40, 0, 3, 3, 0, 4096, 1, 0, 2), (50, 60, 0, 3, 4, 0, 8, 2, 2, 1);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  correlationId INTEGER, globalPid INTEGER, syncType INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (70, 90, 0, 4294967295, 5, 0, 4);
)SQL");
    Loaded l;
    import(path_, l);
    ASSERT_TRUE(l.status.is_ok()) << l.status.to_string();
    const auto kernels = l.sink.of(EventKind::kKernel);
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(l.strings.lookup(kernels[0]->kernel.name), "old_kernel");
    EXPECT_EQ(kernels[0]->kernel.grid_size, 5u);
    EXPECT_EQ(l.sink.summary.dropped, 1u);
    const auto copies = l.sink.of(EventKind::kMemcpy);
    ASSERT_EQ(copies.size(), 2u);
    EXPECT_EQ(copies[0]->copy.direction, CopyDirection::kHostToDevice);
    EXPECT_EQ(copies[0]->copy.src_kind, MemoryKind::kPageable);
    EXPECT_EQ(copies[0]->copy.dst_kind, MemoryKind::kDevice);
    EXPECT_EQ(copies[1]->copy.direction, CopyDirection::kDeviceToHost);
    EXPECT_EQ(copies[1]->copy.dst_kind, MemoryKind::kPinned);
    const auto syncs = l.sink.of(EventKind::kSync);
    ASSERT_EQ(syncs.size(), 1u);
    EXPECT_EQ(syncs[0]->sync.sync_kind, SyncKind::kDevice);
    EXPECT_EQ(syncs[0]->stream, kNoStream);
}

TEST_F(Built, NamesThatAreNotUtf8AreRepaired) {
    sql_exec(path_, R"SQL(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
INSERT INTO StringIds VALUES (1, CAST(X'6B65726E656CFF5F6F6B' AS TEXT));
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER,
  correlationId INTEGER, globalPid INTEGER, demangledName INTEGER);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (10, 20, 0, 3, 1, 0, 1);
)SQL");
    Loaded l;
    import(path_, l);
    ASSERT_EQ(l.sink.of(EventKind::kKernel).size(), 1u);
    EXPECT_EQ(l.strings.lookup(l.sink.of(EventKind::kKernel)[0]->kernel.name),
              "kernel\xEF\xBF\xBD_ok");
    ASSERT_FALSE(l.sink.summary.notes.empty());
    EXPECT_NE(l.sink.summary.notes.back().find("not valid UTF-8"), std::string::npos);
}

TEST_F(Built, OtherDatabasesAndNsysRepsGetClearMessages) {
    sql_exec(path_, "CREATE TABLE customers (id INTEGER, name TEXT);");
    auto r = analyze_files({path_});
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(r.status().message().find("not an Nsight Systems export"), std::string::npos);

    const std::string rep = path_ + ".nsys-rep";
    {
        std::ofstream out(rep, std::ios::binary);
        out << "\x01\x02 a binary report";
    }
    auto rep_result = analyze_files({rep});
    fs::remove(rep);
    ASSERT_FALSE(rep_result.is_ok());
    EXPECT_NE(rep_result.status().message().find("nsys export --type sqlite"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::detail
