// SPDX-License-Identifier: Apache-2.0
// A PyTorch Flight Recorder dump as plain data: what one rank's recorder held of its process
// groups' calls (op, sequence id, sizes, state, times, Python stack) when it was dumped. Read from
// the pickle torch writes (through the safe pickle reader: data only, nothing is run) or from its
// JSON form; the fields are those of torch 2.3 to 2.15 (dump versions "1.4" to "2.10"), each read
// under every name it has had and left absent where a version lacks it.
#pragma once

#include <gpudiag/status.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::detail {

struct FlightRecorderFrame {
    std::string name;  ///< the function
    std::string file;
    std::int64_t line = 0;
};

/// One recorded call.
struct FlightRecorderEntry {
    std::int64_t record_id = -1;
    std::int64_t pg_id = -1;
    std::string group;       ///< the process group's name ("" when the version does not say)
    std::string group_desc;  ///< its description ("default_pg", "tp", "" when not said)
    std::int64_t collective_seq_id = -1;
    std::int64_t p2p_seq_id = -1;
    bool is_p2p = false;
    std::string profiling_name;  ///< "nccl:all_reduce", "gloo:broadcast"
    std::string state;           ///< "scheduled", "started", "completed" (as written)
    bool retired = false;
    std::uint64_t time_created_ns = 0;
    std::uint64_t time_started_ns = 0;    ///< when found started; 0 when not
    std::uint64_t time_completed_ns = 0;  ///< when found completed; 0 when not
    std::int64_t timeout_ms = -1;
    std::string input_sizes;  ///< "[[4], [2, 3]]"
    std::string output_sizes;
    std::string input_dtypes;  ///< "Float, Float"
    std::string output_dtypes;
    std::vector<FlightRecorderFrame> frames;  ///< innermost first, as torch writes them
};

/// A process group as the dump's pg_config describes it.
struct FlightRecorderGroup {
    std::string key;   ///< the pg_config key (its name; torch 2.3: its id)
    std::string desc;  ///< "default_pg", "" when not said
    std::vector<std::int64_t> ranks;
};

/// pg_status: where each process group's counters stood (keyed by pg id).
struct FlightRecorderStatus {
    std::string pg_id;
    std::int64_t last_enqueued = -1;
    std::int64_t last_started = -1;
    std::int64_t last_completed = -1;
};

struct FlightRecorderDump {
    std::string version;  ///< the dump format's ("2.10"); "" when absent
    bool json = false;    ///< read from the JSON form
    std::vector<FlightRecorderGroup> groups;
    std::vector<FlightRecorderStatus> status;
    std::vector<FlightRecorderEntry> entries;
    std::size_t entries_skipped = 0;  ///< entries that were not dicts (damaged)
};

/// Bounds that keep a hostile dump small: torch's ring holds TORCH_FR_BUFFER_SIZE entries (2000
/// by default), each with a stack of a few dozen frames.
inline constexpr std::size_t kFlightRecorderMaxEntries = std::size_t{1} << 20;
inline constexpr std::size_t kFlightRecorderMaxFrames = 256;
inline constexpr std::size_t kFlightRecorderMaxBytes = std::size_t{1} << 30;

/// Reads a dump from its bytes: a pickle (from its protocol opcode) or JSON. `name` prefixes
/// messages. Errors: kCorruptData (not a dump, malformed, or code-running pickle opcodes),
/// kResourceExhausted (past the bounds).
Result<FlightRecorderDump> parse_flight_recorder(std::string_view bytes, const std::string& name);

/// The op of a profiling name without its backend ("nccl:all_reduce" -> "all_reduce").
std::string_view collective_op(std::string_view profiling_name) noexcept;

}  // namespace gpudiag::detail
