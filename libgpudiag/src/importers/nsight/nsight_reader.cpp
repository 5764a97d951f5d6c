// SPDX-License-Identifier: Apache-2.0
// The Nsight Systems SQLite importer. Every table it reads gets one statement that selects the
// columns this file has (a default where a version lacks one) ordered by start; the statements
// are stepped side by side and merged by start into the sink, so nothing is held per row.
#include "importers/nsight/nsight_reader.hpp"

#include "core/producers.hpp"
#include "core/range_names.hpp"
#include "support/utf8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gpudiag::detail {
namespace {

// Nsight's global ids: the process id in bits 24..47, the thread id in bits 0..23.
std::uint32_t pid_of(std::int64_t global) noexcept {
    return static_cast<std::uint32_t>((static_cast<std::uint64_t>(global) >> 24) & 0xFFFFFF);
}
std::uint32_t tid_of(std::int64_t global) noexcept {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(global) & 0xFFFFFF);
}
std::uint32_t clamp_u32(std::int64_t v) noexcept {
    return v < 0           ? 0
           : v > INT32_MAX ? static_cast<std::uint32_t>(INT32_MAX)
                           : static_cast<std::uint32_t>(v);
}
std::uint16_t device_of(std::int64_t v) noexcept {
    return static_cast<std::uint16_t>(std::clamp<std::int64_t>(v, 0, 0xFFFE));
}
std::uint32_t stream_of(std::int64_t v) noexcept {
    // Synchronizations that wait on no stream carry (uint32)-1.
    return v < 0 || v >= 0xFFFFFFFFll ? kNoStream : static_cast<std::uint32_t>(v);
}

bool ends_with(std::string_view s, std::string_view p) noexcept {
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": the export names API calls by their versioned
// entry point; the profiler and the program call them by name.
std::string_view api_name(std::string_view name) noexcept {
    std::size_t v = name.rfind("_v");
    if (v == std::string_view::npos || v + 2 == name.size()) return name;
    for (std::size_t i = v + 2; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return name;
    }
    return name.substr(0, v);
}

// An ENUM_* table of the export: value -> name. Empty when the file has none (older versions).
std::vector<std::pair<std::int64_t, std::string>> load_enum(SqliteDb& db, std::string_view table) {
    std::vector<std::pair<std::int64_t, std::string>> out;
    if (!db.has_table(table)) return out;
    auto stmt = db.prepare("SELECT id, name FROM " + sql_identifier(table));
    if (!stmt) return out;
    while (stmt->step()) out.emplace_back(stmt->int_at(0), std::string(stmt->text_at(1)));
    return out;
}

// The enumerations the events need: from the file's ENUM tables, or the values every export
// before them used (the same as CUPTI's, and as the tables' where both exist).
struct Enums {
    std::unordered_map<std::int64_t, CopyDirection> copy_direction{
        {1, CopyDirection::kHostToDevice},   {2, CopyDirection::kDeviceToHost},
        {3, CopyDirection::kHostToDevice},   {4, CopyDirection::kDeviceToHost},
        {5, CopyDirection::kDeviceToDevice}, {6, CopyDirection::kDeviceToDevice},
        {7, CopyDirection::kDeviceToDevice}, {8, CopyDirection::kDeviceToDevice},
        {9, CopyDirection::kHostToHost},     {10, CopyDirection::kPeerToPeer}};
    std::unordered_map<std::int64_t, MemoryKind> memory_kind{
        {0, MemoryKind::kPageable}, {1, MemoryKind::kPinned},  {2, MemoryKind::kDevice},
        {3, MemoryKind::kArray},    {4, MemoryKind::kManaged}, {5, MemoryKind::kDevice},
        {6, MemoryKind::kManaged}};
    std::unordered_map<std::int64_t, SyncKind> sync_kind{{1, SyncKind::kEvent},
                                                         {2, SyncKind::kStreamWaitEvent},
                                                         {3, SyncKind::kStream},
                                                         {4, SyncKind::kDevice}};
    std::unordered_map<std::int64_t, ApiDomain> api_domain{{0, ApiDomain::kRuntime},
                                                           {1, ApiDomain::kDriver}};
    std::int64_t nvtx_push_pop = 59;
    std::int64_t nvtx_start_end = 60;
    std::int64_t nvtx_mark = 34;
    std::int64_t nvtx_domain_create = 75;

    void load(SqliteDb& db) {
        load_copy_directions(load_enum(db, "ENUM_CUDA_MEMCPY_OPER"));
        load_memory_kinds(load_enum(db, "ENUM_CUDA_MEM_KIND"));
        load_sync_kinds(load_enum(db, "ENUM_CUPTI_SYNC_TYPE"));
        load_event_classes(load_enum(db, "ENUM_NSYS_EVENT_CLASS"));
        for (const auto& [value, name] : load_enum(db, "ENUM_NSYS_EVENT_TYPE")) {
            if (name == "NvtxPushPopRange")
                nvtx_push_pop = value;
            else if (name == "NvtxStartEndRange")
                nvtx_start_end = value;
            else if (name == "NvtxMark")
                nvtx_mark = value;
            else if (name == "NvtxDomainCreate")
                nvtx_domain_create = value;
        }
    }

private:
    void load_copy_directions(const std::vector<std::pair<std::int64_t, std::string>>& rows) {
        if (rows.empty()) return;
        copy_direction.clear();
        for (const auto& [value, name] : rows) {
            CopyDirection d = CopyDirection::kUnknown;
            if (ends_with(name, "HTOD") || ends_with(name, "HTOA"))
                d = CopyDirection::kHostToDevice;
            else if (ends_with(name, "DTOH") || ends_with(name, "ATOH"))
                d = CopyDirection::kDeviceToHost;
            else if (ends_with(name, "DTOD") || ends_with(name, "ATOA") ||
                     ends_with(name, "ATOD") || ends_with(name, "DTOA"))
                d = CopyDirection::kDeviceToDevice;
            else if (ends_with(name, "HTOH"))
                d = CopyDirection::kHostToHost;
            else if (ends_with(name, "PTOP"))
                d = CopyDirection::kPeerToPeer;
            copy_direction[value] = d;
        }
    }
    void load_memory_kinds(const std::vector<std::pair<std::int64_t, std::string>>& rows) {
        if (rows.empty()) return;
        memory_kind.clear();
        for (const auto& [value, name] : rows) {
            MemoryKind k = MemoryKind::kUnknown;
            if (ends_with(name, "_PAGEABLE"))
                k = MemoryKind::kPageable;
            else if (ends_with(name, "_PINNED"))
                k = MemoryKind::kPinned;
            else if (ends_with(name, "_DEVICE") || ends_with(name, "_DEVICE_STATIC"))
                k = MemoryKind::kDevice;
            else if (ends_with(name, "_ARRAY"))
                k = MemoryKind::kArray;
            else if (ends_with(name, "_MANAGED") || ends_with(name, "_MANAGED_STATIC"))
                k = MemoryKind::kManaged;
            memory_kind[value] = k;
        }
    }
    void load_sync_kinds(const std::vector<std::pair<std::int64_t, std::string>>& rows) {
        if (rows.empty()) return;
        sync_kind.clear();
        for (const auto& [value, name] : rows) {
            SyncKind k = SyncKind::kUnknown;
            if (ends_with(name, "_EVENT_SYNCHRONIZE"))
                k = SyncKind::kEvent;
            else if (ends_with(name, "_STREAM_WAIT_EVENT"))
                k = SyncKind::kStreamWaitEvent;
            else if (ends_with(name, "_STREAM_SYNCHRONIZE"))
                k = SyncKind::kStream;
            else if (ends_with(name, "_CONTEXT_SYNCHRONIZE"))
                k = SyncKind::kDevice;
            sync_kind[value] = k;
        }
    }
    void load_event_classes(const std::vector<std::pair<std::int64_t, std::string>>& rows) {
        for (const auto& [value, name] : rows) {
            if (name.find("CUDA_DRIVER") != std::string::npos)
                api_domain[value] = ApiDomain::kDriver;
            else if (name.find("CUDA_RUNTIME") != std::string::npos)
                api_domain[value] = ApiDomain::kRuntime;
        }
    }
};

template <typename T>
T lookup_or(const std::unordered_map<std::int64_t, T>& map, std::int64_t key, T fallback) {
    auto it = map.find(key);
    return it == map.end() ? fallback : it->second;
}

// Names: StringIds ids (or text columns) -> interned ids, each resolved once.
class Names {
public:
    Names(SqliteDb& db, StringTable& strings) : strings_(strings) {
        if (db.has_table("StringIds")) {
            auto stmt = db.prepare("SELECT value FROM StringIds WHERE id = ?");
            if (stmt) lookup_ = std::move(*stmt);
        }
    }

    /// The name in `column`: a StringIds id, or text. `api` strips the entry-point version.
    StringId at(const SqliteStatement& row, int column, bool api = false) {
        if (row.is_null(column)) return kNoString;
        if (row.is_text(column)) return intern(row.text_at(column), api);
        return by_id(row.int_at(column), api);
    }

    StringId by_id(std::int64_t id, bool api) {
        auto& cache = api ? api_cache_ : cache_;
        auto it = cache.find(id);
        if (it != cache.end()) return it->second;
        std::string text;
        lookup_.reset();
        lookup_.bind_int(1, id);
        if (lookup_.step()) text = std::string(lookup_.text_at(0));
        StringId sid = intern(text, api);
        if (cache.size() < kMaxCached) cache.emplace(id, sid);
        return sid;
    }

    StringId intern(std::string_view text, bool api) {
        std::string_view clean = valid_utf8(text, scratch_);
        if (clean.data() != text.data()) ++invalid_utf8_;
        return strings_.intern(api ? api_name(clean) : clean);
    }

    [[nodiscard]] std::string_view text(StringId id) const noexcept { return strings_.lookup(id); }

    /// Names whose bytes were not valid UTF-8 (invalid bytes replaced).
    [[nodiscard]] std::uint64_t invalid_utf8() const noexcept { return invalid_utf8_; }

private:
    static constexpr std::size_t kMaxCached = std::size_t{1} << 22;
    StringTable& strings_;
    SqliteStatement lookup_;
    std::unordered_map<std::int64_t, StringId> cache_;
    std::unordered_map<std::int64_t, StringId> api_cache_;
    std::string scratch_;
    std::uint64_t invalid_utf8_ = 0;
};

// The columns of one table, each selected when the file has it or replaced by a default.
class Columns {
public:
    Columns(SqliteDb& db, std::string_view table) : names_(db.columns(table)) {}
    [[nodiscard]] bool has(std::string_view c) const {
        return std::find(names_.begin(), names_.end(), c) != names_.end();
    }
    /// The first of `candidates` the table has, else `fallback` (an SQL expression).
    [[nodiscard]] std::string pick(std::initializer_list<std::string_view> candidates,
                                   std::string_view fallback = "NULL") const {
        for (std::string_view c : candidates) {
            if (has(c)) return sql_identifier(c);
        }
        return std::string(fallback);
    }

private:
    std::vector<std::string> names_;
};

enum class TableKind : std::uint8_t {
    kRuntime,
    kDriver,
    kNvtx,
    kOsRuntime,
    kSync,
    kKernel,
    kMemcpy,
    kMemset
};

struct TableSpec {
    TableKind kind;
    const char* table;
};

// In this order events that start together are delivered: calls before the work they launch.
constexpr TableSpec kTables[] = {
    {TableKind::kRuntime, "CUPTI_ACTIVITY_KIND_RUNTIME"},
    {TableKind::kDriver, "CUPTI_ACTIVITY_KIND_DRIVER"},
    {TableKind::kNvtx, "NVTX_EVENTS"},
    {TableKind::kOsRuntime, "OSRT_API"},
    {TableKind::kSync, "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"},
    {TableKind::kKernel, "CUPTI_ACTIVITY_KIND_KERNEL"},
    {TableKind::kMemcpy, "CUPTI_ACTIVITY_KIND_MEMCPY"},
    {TableKind::kMemset, "CUPTI_ACTIVITY_KIND_MEMSET"},
};

// The SELECT for one table: start and end first, then the kind's own columns (see convert()).
std::string select_for(const TableSpec& spec, const Columns& c, const Enums& enums) {
    std::string cols = "start, " + c.pick({"end"}, "start");
    switch (spec.kind) {
        case TableKind::kRuntime:
        case TableKind::kDriver:
            cols += ", " + c.pick({"globalTid"}, "0") + ", " + c.pick({"correlationId"}, "0") +
                    ", " + c.pick({"nameId", "name"}) + ", " + c.pick({"returnValue"}, "0") + ", " +
                    c.pick({"eventClass"}, spec.kind == TableKind::kDriver ? "1" : "0");
            break;
        case TableKind::kNvtx:
            cols += ", " + c.pick({"eventType"}, "0") + ", " + c.pick({"globalTid"}, "0") + ", " +
                    c.pick({"text"}) + ", " + c.pick({"textId"}) + ", " + c.pick({"domainId"}, "0");
            break;
        case TableKind::kOsRuntime:
            cols += ", " + c.pick({"globalTid"}, "0") + ", " + c.pick({"nameId", "name"});
            break;
        case TableKind::kSync:
            cols += ", " + c.pick({"deviceId"}, "0") + ", " + c.pick({"streamId"}, "-1") + ", " +
                    c.pick({"correlationId"}, "0") + ", " + c.pick({"globalPid"}, "0") + ", " +
                    c.pick({"syncType"}, "0");
            break;
        case TableKind::kKernel:
            cols += ", " + c.pick({"deviceId"}, "0") + ", " + c.pick({"streamId"}, "0") + ", " +
                    c.pick({"correlationId"}, "0") + ", " + c.pick({"globalPid"}, "0") + ", " +
                    c.pick({"demangledName", "shortName", "mangledName", "name"}) + ", " +
                    c.pick({"gridX"}, "0") + " * " + c.pick({"gridY"}, "1") + " * " +
                    c.pick({"gridZ"}, "1") + ", " + c.pick({"blockX"}, "0") + " * " +
                    c.pick({"blockY"}, "1") + " * " + c.pick({"blockZ"}, "1") + ", " +
                    c.pick({"staticSharedMemory"}, "0") + " + " +
                    c.pick({"dynamicSharedMemory"}, "0") + ", " +
                    c.pick({"registersPerThread"}, "0");
            break;
        case TableKind::kMemcpy:
            cols += ", " + c.pick({"deviceId"}, "0") + ", " + c.pick({"streamId"}, "0") + ", " +
                    c.pick({"correlationId"}, "0") + ", " + c.pick({"globalPid"}, "0") + ", " +
                    c.pick({"bytes"}, "0") + ", " + c.pick({"copyKind"}, "0") + ", " +
                    c.pick({"srcKind"}, "-1") + ", " + c.pick({"dstKind"}, "-1");
            break;
        case TableKind::kMemset:
            cols += ", " + c.pick({"deviceId"}, "0") + ", " + c.pick({"streamId"}, "0") + ", " +
                    c.pick({"correlationId"}, "0") + ", " + c.pick({"globalPid"}, "0") + ", " +
                    c.pick({"bytes"}, "0") + ", " + c.pick({"memKind"}, "-1");
            break;
    }
    std::string sql = "SELECT " + cols + " FROM " + sql_identifier(spec.table);
    if (spec.kind == TableKind::kNvtx) {
        sql += fmt::format(" WHERE {} IN ({}, {}, {})", c.pick({"eventType"}, "0"),
                           enums.nvtx_push_pop, enums.nvtx_start_end, enums.nvtx_mark);
    }
    return sql + " ORDER BY start";
}

// What the conversion of rows needs besides the row.
struct Context {
    Names& names;
    const Enums& enums;
    const std::map<std::int64_t, std::string>& nvtx_domains;
    std::uint64_t dropped = 0;
};

void convert_api(const SqliteStatement& r, TableKind kind, Context& cx, Event& e) {
    e.kind = EventKind::kApiCall;
    e.process = pid_of(r.int_at(2));
    e.thread = tid_of(r.int_at(2));
    e.api.correlation = static_cast<std::uint32_t>(r.int_at(3));
    e.api.name = cx.names.at(r, 4, true);
    e.api.return_code = r.int_at(5);
    e.api.domain = kind == TableKind::kDriver
                       ? ApiDomain::kDriver
                       : lookup_or(cx.enums.api_domain, r.int_at(6), ApiDomain::kUnknown);
}

void convert_nvtx(const SqliteStatement& r, Context& cx, Event& e) {
    e.process = pid_of(r.int_at(3));
    e.thread = tid_of(r.int_at(3));
    StringId name = !r.is_null(4) ? cx.names.at(r, 4) : cx.names.at(r, 5);
    if (r.int_at(2) == cx.enums.nvtx_mark) {
        e.kind = EventKind::kAnnotation;
        e.end_ns = e.start_ns;
        e.annotation.text = name;
        return;
    }
    e.kind = EventKind::kRange;
    e.range.name = name;
    e.range.category = RangeCategory::kGeneric;
    auto domain = cx.nvtx_domains.find(r.int_at(6));
    if (domain != cx.nvtx_domains.end() && domain->second == kGpudiagNvtxDomain) {
        e.range.category = RangeCategory::kPhase;  // gpudiag.phase(), as the live capture reads it
        return;
    }
    RangeMeaning meaning = nvtx_range_meaning(cx.names.text(name));
    if (meaning.known) {
        e.range.category = meaning.category;
        if (meaning.category == RangeCategory::kStep)
            e.range.id = static_cast<std::uint64_t>(meaning.step);
    }
}

void convert_gpu_common(const SqliteStatement& r, Event& e) {
    e.device = device_of(r.int_at(2));
    e.stream = stream_of(r.int_at(3));
    e.process = pid_of(r.int_at(5));
}

void convert_row(const SqliteStatement& r, TableKind kind, Context& cx, Event& e) {
    switch (kind) {
        case TableKind::kRuntime:
        case TableKind::kDriver: convert_api(r, kind, cx, e); break;
        case TableKind::kNvtx: convert_nvtx(r, cx, e); break;
        case TableKind::kOsRuntime:
            e.kind = EventKind::kRange;
            e.process = pid_of(r.int_at(2));
            e.thread = tid_of(r.int_at(2));
            e.range.name = cx.names.at(r, 3);
            e.range.category = RangeCategory::kOsRuntime;
            break;
        case TableKind::kSync:
            e.kind = EventKind::kSync;
            convert_gpu_common(r, e);
            e.sync.correlation = static_cast<std::uint32_t>(r.int_at(4));
            e.sync.sync_kind = lookup_or(cx.enums.sync_kind, r.int_at(6), SyncKind::kUnknown);
            break;
        case TableKind::kKernel:
            e.kind = EventKind::kKernel;
            convert_gpu_common(r, e);
            e.kernel.correlation = static_cast<std::uint32_t>(r.int_at(4));
            e.kernel.name = cx.names.at(r, 6);
            e.kernel.grid_size = clamp_u32(r.int_at(7));
            e.kernel.block_size = clamp_u32(r.int_at(8));
            e.kernel.shared_bytes = clamp_u32(r.int_at(9));
            e.kernel.registers = clamp_u32(r.int_at(10));
            break;
        case TableKind::kMemcpy:
            e.kind = EventKind::kMemcpy;
            convert_gpu_common(r, e);
            e.copy.correlation = static_cast<std::uint32_t>(r.int_at(4));
            e.copy.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(r.int_at(6), 0));
            e.copy.direction =
                lookup_or(cx.enums.copy_direction, r.int_at(7), CopyDirection::kUnknown);
            e.copy.src_kind = lookup_or(cx.enums.memory_kind, r.int_at(8), MemoryKind::kUnknown);
            e.copy.dst_kind = lookup_or(cx.enums.memory_kind, r.int_at(9), MemoryKind::kUnknown);
            break;
        case TableKind::kMemset:
            e.kind = EventKind::kMemset;
            convert_gpu_common(r, e);
            e.copy.correlation = static_cast<std::uint32_t>(r.int_at(4));
            e.copy.bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(r.int_at(6), 0));
            e.copy.dst_kind = lookup_or(cx.enums.memory_kind, r.int_at(7), MemoryKind::kUnknown);
            break;
    }
}

// One table being read in start order.
struct Cursor {
    TableKind kind;
    std::string table;
    std::size_t rank = 0;
    SqliteStatement stmt;
    Event next;

    // The next convertible row into `next`; false at the end or on an error (see stmt.error()).
    bool advance(Context& cx) {
        while (stmt.step()) {
            if (stmt.is_null(0) || stmt.int_at(0) < 0) {
                ++cx.dropped;
                continue;
            }
            next = Event();
            next.start_ns = static_cast<std::uint64_t>(stmt.int_at(0));
            std::int64_t end = stmt.is_null(1) ? stmt.int_at(0) : stmt.int_at(1);
            next.end_ns = static_cast<std::uint64_t>(std::max(end, stmt.int_at(0)));
            convert_row(stmt, kind, cx, next);
            return true;
        }
        return false;
    }
};

// ---- the report's metadata ----------------------------------------------------------------------

// name -> value rows of the export's metadata (the table was renamed in 3.x).
std::vector<std::pair<std::string, std::string>> metadata(SqliteDb& db, std::string_view table) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!db.has_table(table)) return out;
    auto stmt = db.prepare("SELECT name, value FROM " + sql_identifier(table));
    if (!stmt) return out;
    std::string scratch;
    while (stmt->step()) {
        out.emplace_back(std::string(stmt->text_at(0)),
                         std::string(valid_utf8(stmt->text_at(1), scratch)));
    }
    return out;
}

// RANK="3" from a captured environment variable ("NAME=\"value\"" or "NAME=value").
bool env_value(std::string_view entry, std::string_view name, std::int64_t& out) {
    if (entry.size() <= name.size() + 1 || entry.compare(0, name.size(), name) != 0 ||
        entry[name.size()] != '=') {
        return false;
    }
    std::string_view v = entry.substr(name.size() + 1);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    if (v.empty() || v.size() > 9) return false;
    std::int64_t n = 0;
    for (char c : v) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
    }
    out = n;
    return true;
}

// The rank and world size the launcher gave the profiled process (torchrun, MPI, Slurm), from
// the environment the capture recorded.
void read_rank(const std::vector<std::pair<std::string, std::string>>& capture, SourceInfo& info) {
    constexpr std::string_view kRankVars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                              "SLURM_PROCID"};
    constexpr std::string_view kSizeVars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                              "SLURM_NTASKS"};
    int rank_pref = 99;
    int size_pref = 99;
    for (const auto& [key, value] : capture) {
        if (key.find("ENVIRONMENT_VARIABLE") == std::string::npos) continue;
        std::int64_t n = 0;
        for (int i = 0; i < 4; ++i) {
            if (i < rank_pref && env_value(value, kRankVars[i], n)) {
                info.rank = static_cast<std::int32_t>(n);
                rank_pref = i;
            }
            if (i < size_pref && env_value(value, kSizeVars[i], n)) {
                info.world_size = static_cast<std::int32_t>(n);
                size_pref = i;
            }
        }
    }
}

// Nsight writes a GPU's UUID bare and its PCI address with a 4-digit domain; NVML, nvidia-smi
// and dcgm-exporter write "GPU-<uuid>" and an 8-digit domain. Reports use NVML's forms so that
// one GPU reads the same whatever the input. An all-zero UUID is none.
std::string nvml_uuid(const std::string& uuid) {
    if (uuid.empty() || uuid.find_first_not_of("0-") == std::string::npos) return {};
    return uuid.rfind("GPU-", 0) == 0 || uuid.rfind("MIG-", 0) == 0 ? uuid : "GPU-" + uuid;
}
std::string nvml_bus_id(std::string bus) {
    const std::size_t colon = bus.find(':');
    if (colon == std::string::npos || colon >= 8 || bus.find(':', colon + 1) == std::string::npos)
        return bus;  // no domain given: left as written
    return std::string(8 - colon, '0') + bus;
}

void read_devices(SqliteDb& db, SourceInfo& info) {
    Columns c(db, "TARGET_INFO_GPU");
    if (!c.has("id")) return;
    auto stmt =
        db.prepare("SELECT id, " + c.pick({"name"}, "''") + ", " + c.pick({"totalMemory"}, "0") +
                   ", " + c.pick({"uuid"}, "''") + ", " + c.pick({"smCount"}, "1") + ", " +
                   c.pick({"busLocation"}, "''") + " FROM TARGET_INFO_GPU ORDER BY id");
    if (!stmt) return;
    std::string scratch;
    while (stmt->step() && info.devices.size() < 256) {
        // Integrated and display-only adapters are listed too; CUDA devices have memory and SMs.
        if (stmt->int_at(2) <= 0 && stmt->int_at(4) <= 0) continue;
        DeviceInfo d;
        d.ordinal = device_of(stmt->int_at(0));
        d.name = std::string(valid_utf8(stmt->text_at(1), scratch));
        d.total_memory_bytes =
            static_cast<std::uint64_t>(std::max<std::int64_t>(stmt->int_at(2), 0));
        d.uuid = nvml_uuid(std::string(valid_utf8(stmt->text_at(3), scratch)));
        d.pci_bus_id = nvml_bus_id(std::string(valid_utf8(stmt->text_at(5), scratch)));
        info.devices.push_back(std::move(d));
    }
}

// The process that ran the GPU work: the one with most kernels.
void read_process(SqliteDb& db, SourceInfo& info) {
    if (!db.has_table("CUPTI_ACTIVITY_KIND_KERNEL") ||
        !Columns(db, "CUPTI_ACTIVITY_KIND_KERNEL").has("globalPid")) {
        return;
    }
    auto stmt = db.prepare(
        "SELECT globalPid, count(*) AS n FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "GROUP BY globalPid ORDER BY n DESC LIMIT 1");
    if (!stmt || !stmt->step()) return;
    const std::int64_t global = stmt->int_at(0);
    info.pid = pid_of(global);
    if (!db.has_table("PROCESSES")) return;
    auto name = db.prepare("SELECT name FROM PROCESSES WHERE globalPid = ?");
    if (!name) return;
    name->bind_int(1, global);
    std::string scratch;
    if (name->step() && !name->is_null(0)) {
        info.properties.emplace_back("process_name",
                                     std::string(valid_utf8(name->text_at(0), scratch)));
    }
}

SourceInfo read_source_info(SqliteDb& db, const std::string& name) {
    SourceInfo info;
    info.producer = kProducerNsight;
    info.description = name;
    auto meta = metadata(db, "META_DATA_EXPORT");
    if (meta.empty()) meta = metadata(db, "EXPORT_META_DATA");
    for (const auto& [key, value] : meta) {
        if (key == "EXPORT_PRODUCT_VERSION") info.properties.emplace_back("nsys_version", value);
        if (key == "EXPORT_SCHEMA_VERSION")
            info.properties.emplace_back("nsys_export_schema", value);
    }
    read_rank(metadata(db, "META_DATA_CAPTURE"), info);
    if (db.has_table("TARGET_INFO_SESSION_START_TIME")) {
        auto stmt = db.prepare("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME");
        if (stmt && stmt->step() && stmt->int_at(0) > 0)
            info.wall_clock_offset_ns = stmt->int_at(0);
    }
    read_devices(db, info);
    read_process(db, info);
    info.properties.emplace_back("device_vendor", "nvidia");
    return info;
}

std::map<std::int64_t, std::string> nvtx_domains(SqliteDb& db, const Enums& enums, Names& names) {
    std::map<std::int64_t, std::string> out;
    Columns c(db, "NVTX_EVENTS");
    if (!c.has("domainId") || !c.has("eventType")) return out;
    auto stmt =
        db.prepare(fmt::format("SELECT domainId, {}, {} FROM NVTX_EVENTS WHERE eventType = {}",
                               c.pick({"text"}), c.pick({"textId"}), enums.nvtx_domain_create));
    if (!stmt) return out;
    while (stmt->step() && out.size() < 4096) {
        StringId id = !stmt->is_null(1) ? names.at(*stmt, 1) : names.at(*stmt, 2);
        out[stmt->int_at(0)] = std::string(names.text(id));
    }
    return out;
}

// ---- the merge
// ------------------------------------------------------------------------------------

class Merge {
public:
    Merge(SqliteDb& db, Context& cx) : db_(db), cx_(cx) {}

    // Opens a cursor per table the file has; `notes` gets what was not readable.
    void open(std::vector<std::string>& notes) {
        for (std::size_t rank = 0; rank < std::size(kTables); ++rank) {
            const TableSpec& spec = kTables[rank];
            if (!db_.has_table(spec.table)) continue;
            Columns c(db_, spec.table);
            if (!c.has("start")) {
                notes.push_back(std::string(spec.table) + " has no start column: not read");
                continue;
            }
            total_rows_ += count_rows(spec.table);
            auto stmt = db_.prepare(select_for(spec, c, cx_.enums));
            if (!stmt) {
                notes.push_back(std::string(spec.table) + ": not read (" + stmt.status().message() +
                                ")");
                continue;
            }
            cursors_.push_back(Cursor{spec.kind, spec.table, rank, std::move(*stmt), Event()});
            if (spec.kind == TableKind::kKernel || spec.kind == TableKind::kMemcpy ||
                spec.kind == TableKind::kMemset) {
                has_gpu_tables_ = true;
            }
        }
    }

    // Sends every row, merged by start, to `sink`; returns the first table error, if any.
    std::string run(EventSink& sink,
                    const std::function<void(std::uint64_t, std::uint64_t)>& progress) {
        std::vector<Cursor*> heap;
        std::string error;
        for (auto& c : cursors_) {
            if (c.advance(cx_))
                heap.push_back(&c);
            else if (!c.stmt.error().empty())
                return c.table + ": " + c.stmt.error();
        }
        auto later = [](const Cursor* a, const Cursor* b) {
            return a->next.start_ns != b->next.start_ns ? a->next.start_ns > b->next.start_ns
                                                        : a->rank > b->rank;
        };
        std::make_heap(heap.begin(), heap.end(), later);
        std::vector<Event> batch;
        batch.reserve(kBatch);
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), later);
            Cursor* c = heap.back();
            batch.push_back(c->next);
            ++delivered_;
            if (c->advance(cx_)) {
                std::push_heap(heap.begin(), heap.end(), later);
            } else {
                heap.pop_back();
                if (!c->stmt.error().empty()) {
                    error = c->table + ": " + c->stmt.error();
                    break;
                }
            }
            if (batch.size() == kBatch) {
                sink.consume(batch);
                batch.clear();
                if (progress) progress(delivered_, total_rows_);
            }
        }
        if (!batch.empty()) sink.consume(batch);
        if (progress) progress(total_rows_, total_rows_);
        return error;
    }

    [[nodiscard]] std::uint64_t delivered() const noexcept { return delivered_; }
    [[nodiscard]] bool has_gpu_tables() const noexcept { return has_gpu_tables_; }

private:
    static constexpr std::size_t kBatch = 4096;

    std::uint64_t count_rows(const char* table) {
        auto stmt = db_.prepare(std::string("SELECT count(*) FROM ") + sql_identifier(table));
        return stmt && stmt->step()
                   ? static_cast<std::uint64_t>(std::max<std::int64_t>(stmt->int_at(0), 0))
                   : 0;
    }

    SqliteDb& db_;
    Context& cx_;
    std::vector<Cursor> cursors_;
    std::uint64_t total_rows_ = 0;
    std::uint64_t delivered_ = 0;
    bool has_gpu_tables_ = false;
};

}  // namespace

bool is_nsight_export(const SqliteDb& db) noexcept {
    for (const char* t :
         {"EXPORT_META_DATA", "META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME"}) {
        if (db.has_table(t)) return true;
    }
    return db.has_table("StringIds") && (db.has_table("CUPTI_ACTIVITY_KIND_KERNEL") ||
                                         db.has_table("CUPTI_ACTIVITY_KIND_RUNTIME"));
}

}  // namespace gpudiag::detail

namespace gpudiag::detail {

Result<std::unique_ptr<NsightReader>> NsightReader::open(const std::string& path) {
    auto db = SqliteDb::open(path);
    if (!db) return db.status();
    if (!is_nsight_export(**db)) {
        return unsupported(path +
                           ": an SQLite database, but not an Nsight Systems export (no "
                           "StringIds, CUPTI or export metadata tables)");
    }
    return std::unique_ptr<NsightReader>(new NsightReader(std::move(*db), path));
}

Result<std::unique_ptr<NsightReader>> NsightReader::open_image(std::string_view bytes,
                                                               const std::string& name) {
    auto db = SqliteDb::open_image(bytes);
    if (!db) return Status(db.status().code(), name + ": " + db.status().message());
    if (!is_nsight_export(**db)) {
        return unsupported(name + ": an SQLite database, but not an Nsight Systems export");
    }
    return std::unique_ptr<NsightReader>(new NsightReader(std::move(*db), name));
}

Status NsightReader::read(EventSink& sink, StringTable& strings) {
    Enums enums;
    enums.load(*db_);
    Names names(*db_, strings);
    const auto domains = nvtx_domains(*db_, enums, names);
    Context cx{names, enums, domains, 0};
    SourceSummary summary;
    Merge merge(*db_, cx);
    merge.open(summary.notes);
    SourceInfo info = read_source_info(*db_, name_);
    sink.begin(info, strings);
    std::string error = merge.run(sink, progress_);
    summary.events = merge.delivered();
    summary.dropped = cx.dropped;
    if (!merge.has_gpu_tables()) {
        summary.notes.push_back(
            "no CUDA kernels, copies or memsets in this report (recorded without "
            "--trace=cuda?): GPU timeline figures are not available");
    }
    if (cx.dropped > 0) {
        summary.notes.push_back(
            fmt::format("{} rows without a start time were skipped", cx.dropped));
    }
    if (names.invalid_utf8() > 0) {
        summary.notes.push_back(
            fmt::format("{} names were not valid UTF-8; their invalid bytes read as U+FFFD",
                        names.invalid_utf8()));
    }
    if (!error.empty()) {
        summary.truncated = true;
        summary.notes.push_back("stopped reading at a damaged table (" + error + ")");
    }
    sink.end(summary);
    if (!error.empty()) return corrupt_data(name_ + ": " + error);
    return Status::ok();
}

}  // namespace gpudiag::detail
