// SPDX-License-Identifier: Apache-2.0
// SafePickleReader: a pickle virtual machine that knows only data opcodes. It cannot import,
// call or construct anything, so reading a hostile file runs no code: opcodes that would
// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4, PERSID,
// BINPERSID) stop the read with an error naming the opcode and its offset.
#pragma once

#include <gpudiag/status.hpp>

#include "importers/byte_stream.hpp"
#include "importers/torch_snapshot/pickle_store.hpp"
#include "importers/torch_snapshot/pickle_value.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace gpudiag::detail {

/// Bounds that keep a hostile or huge pickle from exhausting memory or the stack.
struct PickleLimits {
    std::size_t max_depth = 64;                             ///< nesting of containers
    std::size_t max_container_items = 64u << 20;            ///< items in one list/tuple/dict
    std::size_t max_string_bytes = 256u << 20;              ///< one string or bytes value
    std::size_t max_stack_items = 64u << 20;                ///< values pending on the VM stack
    std::uint64_t max_live_bytes = std::uint64_t{4} << 30;  ///< decoded data held at once
};

/// Lets a consumer take the items of chosen lists one at a time, as they are decoded, instead
/// of letting the reader keep them: this is how a multi-GB snapshot trace is read in bounded
/// memory. Roles ("tags") are handler-defined small integers given by position from the root.
class PickleStreamHandler {
public:
    virtual ~PickleStreamHandler() = default;
    /// Tag of the outermost container (0 = no role).
    virtual std::uint16_t root_tag() = 0;
    /// Tag of a container that is the value under string `key` (dict parent; `key` may be
    /// empty for non-string keys) or item `index` (list parent) of a container tagged
    /// `parent_tag` (never 0: the children of a container without a role have none).
    virtual std::uint16_t child_tag(std::uint16_t parent_tag, std::string_view key,
                                    std::size_t index) = 0;
    /// True when the items of lists tagged `tag` go to on_item() and are not kept.
    virtual bool streams(std::uint16_t tag) = 0;
    /// One complete item of a streamed list (the view is valid during the call); a non-OK
    /// status stops the read with it.
    virtual Status on_item(std::uint16_t list_tag, std::size_t index, PickleView item) = 0;
};

class SafePickleReader {
public:
    explicit SafePickleReader(PickleLimits limits = {}) : limits_(limits) {}

    static constexpr std::uint64_t kUnknownSize = std::numeric_limits<std::uint64_t>::max();

    /// Reads one pickle from `in`, in pieces. `size`: the bytes `in` holds when known (a plain
    /// file), which lets a damaged length be told from a huge value. `name` prefixes messages.
    /// Returns the root value (streamed lists are left empty). Errors: kCorruptData for
    /// truncated or malformed input and for any code-running opcode; kResourceExhausted
    /// when a limit is reached; the stream's own errors; whatever the handler returns.
    Result<PickleRef> read(ByteStream& in, std::uint64_t size, const std::string& name,
                           PickleStreamHandler* handler = nullptr) noexcept;
    /// The same from memory (tests, fuzzing).
    Result<PickleRef> read(std::string_view bytes, const std::string& name,
                           PickleStreamHandler* handler = nullptr) noexcept;

    /// Bytes consumed by the last read.
    [[nodiscard]] std::uint64_t bytes_read() const noexcept { return offset_; }
    /// The last read failed because the input ended before the pickle did (cut short, or a
    /// length that claims more than is left); what the handler was given before stays valid.
    [[nodiscard]] bool ended_early() const noexcept { return ended_early_; }

private:
    class Input;
    class Machine;
    Result<PickleRef> run(Input& input, const std::string& name, PickleStreamHandler* handler);
    static PickleRef materialize(const PickleStore& store, const PickleSlot& root);

    PickleLimits limits_;
    std::uint64_t offset_ = 0;
    bool ended_early_ = false;
};

/// The pickle name of opcode byte `op` ("GLOBAL", "BININT1", ...) or "unknown".
const char* pickle_opcode_name(unsigned char op) noexcept;

}  // namespace gpudiag::detail
