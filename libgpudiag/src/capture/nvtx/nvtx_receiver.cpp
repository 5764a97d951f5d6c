// SPDX-License-Identifier: Apache-2.0
// NvtxReceiver.
//
// Attach/detach without a lock on the hot path: a handler announces itself in `in_flight`
// before loading the sink pointer; detach() clears the pointer and waits for `in_flight` to
// drain (both sides sequentially consistent), so the queue and string table a handler uses stay
// alive until it returns.
#include "capture/nvtx/nvtx_receiver.hpp"

#include "capture/platform/platform.hpp"
#include "core/clock.hpp"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>

#if GPUDIAG_HAVE_CUDA_HEADERS
#    define NVTX_NO_IMPL
#    include <nvtx3/nvToolsExt.h>
#endif

namespace gpudiag::detail {
namespace {

constexpr std::size_t kMaxDomains = 64;  // domain handle values 1..63; 0 = default
constexpr std::size_t kMaxRegisteredStrings = 4096;
constexpr std::size_t kMaxOpenStartEnd = 1024;  // nvtxRangeStart ranges not yet ended
constexpr std::size_t kStackDepth = 64;         // per thread and domain
constexpr std::size_t kStacksPerThread = 4;     // domains a thread nests in at once
constexpr std::size_t kNameCacheSize = 256;     // per thread, direct-mapped
constexpr std::size_t kMaxNameBytes = 256;      // longer names are cut (NVTX names are short)
constexpr const char* kOwnDomain = "gpudiag";

std::uint64_t hash_bytes(std::string_view s) noexcept {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
    return h ^ s.size();
}

struct Sink {
    EventQueue* out;
    StringTable* strings;
    std::uint64_t generation;
    std::uint32_t pid;  // cached: getpid() is a system call on current glibc
};

struct OpenRange {
    std::uint64_t id;
    StringId name;
};

struct DomainStack {
    std::uint32_t domain;
    std::uint32_t depth;  // may exceed kStackDepth: deeper ranges are counted, not stored
    std::array<OpenRange, kStackDepth> ranges;
};

struct CachedName {
    std::uint64_t hash;
    std::uint64_t generation;
    StringId id;
};

struct ThreadState {
    std::array<DomainStack, kStacksPerThread> stacks{};
    std::uint32_t stacks_used = 0;
    std::array<CachedName, kNameCacheSize> names{};
    std::uint64_t next_range = 0;
};

thread_local ThreadState t_state;

}  // namespace

struct NvtxReceiver::Impl {
    std::atomic<Sink*> sink{nullptr};
    std::atomic<std::uint64_t> in_flight{0};
    std::atomic<std::uint64_t> generation{0};
    std::mutex attach_mutex;  // attach/detach only
    Sink sinks[2]{};          // alternate so a late reader never sees a reused slot mid-update
    int next_sink = 0;

    std::atomic<std::uint32_t> modules{0};
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<std::uint64_t> next_start_id{1};

    // Domains and registered strings: append-only, published by an atomic count; the texts are
    // heap copies kept for the process' lifetime (bounded by the caps).
    std::mutex registry_mutex;
    std::array<std::atomic<const char*>, kMaxDomains> domains{};
    std::array<std::atomic<bool>, kMaxDomains> own_domain{};  // read by handlers without a lock
    std::uint32_t domain_count = 1;                           // slot 0: default domain
    std::array<std::atomic<const char*>, kMaxRegisteredStrings> registered{};
    std::uint32_t registered_count = 1;  // handle 0 = none

    std::mutex open_mutex;  // start/end ranges: rare, may cross threads
    struct StartEnd {
        std::uint64_t id;
        std::uint64_t start_ns;
        StringId name;
        RangeCategory category;
        std::uint32_t thread;
    };
    std::array<StartEnd, kMaxOpenStartEnd> open{};
    std::size_t open_count = 0;

    // RAII announcement of a handler; `s` is null when no session is attached.
    struct Use {
        Impl& impl;
        Sink* s;
        explicit Use(Impl& i) noexcept : impl(i) {
            impl.in_flight.fetch_add(1, std::memory_order_seq_cst);
            s = impl.sink.load(std::memory_order_seq_cst);
        }
        ~Use() { impl.in_flight.fetch_sub(1, std::memory_order_release); }
        Use(const Use&) = delete;
        Use& operator=(const Use&) = delete;
    };

    RangeCategory category_of(std::uint32_t domain) const noexcept {
        return domain < kMaxDomains && own_domain[domain].load(std::memory_order_acquire)
                   ? RangeCategory::kPhase
                   : RangeCategory::kGeneric;
    }

    StringId intern(const Sink& s, std::string_view name) noexcept {
        if (name.empty()) return kNoString;
        if (name.size() > kMaxNameBytes) name = name.substr(0, kMaxNameBytes);
        std::uint64_t h = hash_bytes(name);
        CachedName& c = t_state.names[h % kNameCacheSize];
        if (c.hash == h && c.generation == s.generation && c.id != kNoString) return c.id;
        StringId id = s.strings->intern(name);
        c = CachedName{h, s.generation, id};
        return id;
    }

    DomainStack* stack_for(std::uint32_t domain) noexcept {
        ThreadState& t = t_state;
        for (std::uint32_t i = 0; i < t.stacks_used; ++i) {
            if (t.stacks[i].domain == domain) return &t.stacks[i];
        }
        if (t.stacks_used < kStacksPerThread) {
            DomainStack& d = t.stacks[t.stacks_used++];
            d.domain = domain;
            d.depth = 0;
            return &d;
        }
        // Reuse a stack that is empty now.
        for (auto& d : t.stacks) {
            if (d.depth == 0) {
                d.domain = domain;
                return &d;
            }
        }
        return nullptr;
    }

    // A full queue counts its own refusals; `dropped` is for losses only we can see.
    static void emit(const Sink& s, const Event& e) noexcept { (void)s.out->try_push(e); }

    static Event range_event(const Sink& s, EventKind kind) noexcept {
        Event e;
        e.kind = kind;
        e.process = s.pid;
        e.thread = platform::thread_id();
        e.start_ns = e.end_ns = monotonic_now_ns();
        return e;
    }
};

// The receiver and its state are built in static storage and never destroyed: NVTX keeps calling
// our handlers until the process exits, and building them cannot fail for want of memory.
namespace {
alignas(NvtxReceiver::Impl) unsigned char g_receiver_state[sizeof(NvtxReceiver::Impl)];
}  // namespace

NvtxReceiver::NvtxReceiver() : impl_(::new (static_cast<void*>(g_receiver_state)) Impl) {}

NvtxReceiver& NvtxReceiver::instance() noexcept {
    alignas(NvtxReceiver) static unsigned char storage[sizeof(NvtxReceiver)];
    static auto* receiver = ::new (static_cast<void*>(storage)) NvtxReceiver;
    return *receiver;
}

bool NvtxReceiver::attach(EventQueue& out, StringTable& strings) noexcept {
    Impl& m = *impl_;
    std::lock_guard<std::mutex> lock(m.attach_mutex);
    if (m.sink.load() != nullptr) return false;
    Sink& s = m.sinks[m.next_sink];
    m.next_sink ^= 1;
    s = Sink{&out, &strings, m.generation.fetch_add(1) + 1, platform::process_id()};
    m.sink.store(&s, std::memory_order_seq_cst);
    return true;
}

void NvtxReceiver::detach() noexcept {
    Impl& m = *impl_;
    std::lock_guard<std::mutex> lock(m.attach_mutex);
    m.sink.store(nullptr, std::memory_order_seq_cst);
    while (m.in_flight.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    std::lock_guard<std::mutex> open_lock(m.open_mutex);
    m.open_count = 0;  // their names belong to the detached table
}

std::uint32_t NvtxReceiver::modules() const noexcept {
    return impl_->modules.load();
}
std::uint64_t NvtxReceiver::calls() const noexcept {
    return impl_->calls.load();
}
std::uint64_t NvtxReceiver::dropped() const noexcept {
    return impl_->dropped.load();
}

int NvtxReceiver::push(std::uint32_t domain, std::string_view name) noexcept {
    Impl& m = *impl_;
    m.calls.fetch_add(1, std::memory_order_relaxed);
    DomainStack* st = m.stack_for(domain);
    if (st == nullptr) {
        m.dropped.fetch_add(1, std::memory_order_relaxed);
        return -1;
    }
    std::uint32_t level = st->depth++;
    Impl::Use use(m);
    if (use.s == nullptr) {
        if (level < kStackDepth) st->ranges[level] = OpenRange{0, kNoString};
        return static_cast<int>(level);
    }
    Event e = m.range_event(*use.s, EventKind::kRangeBegin);
    e.range.name = m.intern(*use.s, name);
    e.range.category = m.category_of(domain);
    // Ids unique per process without a shared counter: thread id and a per-thread sequence.
    e.range.id = (std::uint64_t{e.thread} << 32) | (++t_state.next_range & 0xFFFFFFFFu);
    e.range.parent = level > 0 && level - 1 < kStackDepth ? st->ranges[level - 1].id : 0;
    if (level < kStackDepth) {
        st->ranges[level] = OpenRange{e.range.id, e.range.name};
    } else {
        m.dropped.fetch_add(1, std::memory_order_relaxed);
    }
    m.emit(*use.s, e);
    return static_cast<int>(level);
}

int NvtxReceiver::pop(std::uint32_t domain) noexcept {
    Impl& m = *impl_;
    m.calls.fetch_add(1, std::memory_order_relaxed);
    DomainStack* st = m.stack_for(domain);
    if (st == nullptr || st->depth == 0) return -1;  // NVTX: negative = nothing to pop
    std::uint32_t level = --st->depth;
    Impl::Use use(m);
    if (use.s == nullptr || level >= kStackDepth || st->ranges[level].id == 0) {
        return static_cast<int>(level);
    }
    Event e = m.range_event(*use.s, EventKind::kRangeEnd);
    e.range.name = st->ranges[level].name;
    e.range.category = m.category_of(domain);
    e.range.id = st->ranges[level].id;
    e.range.parent = level > 0 && level - 1 < kStackDepth ? st->ranges[level - 1].id : 0;
    m.emit(*use.s, e);
    return static_cast<int>(level);
}

std::uint64_t NvtxReceiver::start(std::uint32_t domain, std::string_view name) noexcept {
    Impl& m = *impl_;
    m.calls.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t id = m.next_start_id.fetch_add(1, std::memory_order_relaxed);
    Impl::Use use(m);
    if (use.s == nullptr) return id;
    StringId name_id = m.intern(*use.s, name);
    std::lock_guard<std::mutex> lock(m.open_mutex);
    if (m.open_count >= kMaxOpenStartEnd) {
        m.dropped.fetch_add(1, std::memory_order_relaxed);
        return id;
    }
    m.open[m.open_count++] = Impl::StartEnd{id, monotonic_now_ns(), name_id, m.category_of(domain),
                                            platform::thread_id()};
    return id;
}

void NvtxReceiver::end(std::uint64_t id) noexcept {
    Impl& m = *impl_;
    m.calls.fetch_add(1, std::memory_order_relaxed);
    Impl::Use use(m);
    if (use.s == nullptr) return;
    Impl::StartEnd found{};
    {
        std::lock_guard<std::mutex> lock(m.open_mutex);
        for (std::size_t i = 0; i < m.open_count; ++i) {
            if (m.open[i].id == id) {
                found = m.open[i];
                m.open[i] = m.open[--m.open_count];
                break;
            }
        }
    }
    if (found.id == 0) return;  // started before the session attached, or never started
    Event e = m.range_event(*use.s, EventKind::kRange);
    e.thread = found.thread;
    e.start_ns = found.start_ns;
    e.range.name = found.name;
    e.range.category = found.category;
    e.range.id = id;
    m.emit(*use.s, e);
}

void NvtxReceiver::mark(std::uint32_t /*domain*/, std::string_view name) noexcept {
    Impl& m = *impl_;
    m.calls.fetch_add(1, std::memory_order_relaxed);
    Impl::Use use(m);
    if (use.s == nullptr) return;
    Event e = m.range_event(*use.s, EventKind::kAnnotation);
    e.annotation.text = m.intern(*use.s, name);
    m.emit(*use.s, e);
}

std::uint32_t NvtxReceiver::create_domain(std::string_view name) noexcept {
    Impl& m = *impl_;
    try {
        std::lock_guard<std::mutex> lock(m.registry_mutex);
        for (std::uint32_t i = 1; i < m.domain_count; ++i) {
            const char* existing = m.domains[i].load(std::memory_order_acquire);
            if (existing != nullptr && name == existing) return i;
        }
        if (m.domain_count >= kMaxDomains) return 0;
        char* copy = new char[name.size() + 1];
        std::memcpy(copy, name.data(), name.size());
        copy[name.size()] = '\0';
        std::uint32_t i = m.domain_count++;
        m.own_domain[i].store(name == kOwnDomain, std::memory_order_release);
        m.domains[i].store(copy, std::memory_order_release);
        return i;
    } catch (...) {
        return 0;
    }
}

std::uintptr_t NvtxReceiver::register_string(std::string_view text) noexcept {
    Impl& m = *impl_;
    try {
        std::lock_guard<std::mutex> lock(m.registry_mutex);
        if (m.registered_count >= kMaxRegisteredStrings) {
            m.dropped.fetch_add(1, std::memory_order_relaxed);
            return 0;
        }
        char* copy = new char[text.size() + 1];
        std::memcpy(copy, text.data(), text.size());
        copy[text.size()] = '\0';
        std::uint32_t i = m.registered_count++;
        m.registered[i].store(copy, std::memory_order_release);
        return i;
    } catch (...) {
        return 0;
    }
}

std::string_view NvtxReceiver::registered_string(std::uintptr_t handle) const noexcept {
    if (handle == 0 || handle >= kMaxRegisteredStrings) return {};
    const char* s = impl_->registered[handle].load(std::memory_order_acquire);
    return s != nullptr ? std::string_view(s) : std::string_view();
}

// ------------------------------------------------------------------------ NVTX entry points
#if GPUDIAG_HAVE_CUDA_HEADERS
namespace {

// Converts a wide NVTX message to UTF-8 in a per-thread buffer (no allocation).
std::string_view utf8_of(const wchar_t* w) noexcept {
    thread_local char buf[kMaxNameBytes + 4];
    std::size_t n = 0;
    if (w == nullptr) return {};
    for (; *w != 0 && n + 4 <= kMaxNameBytes; ++w) {
        auto c = static_cast<std::uint32_t>(static_cast<std::make_unsigned_t<wchar_t>>(*w));
        if (c < 0x80) {
            buf[n++] = static_cast<char>(c);
        } else if (c < 0x800) {
            buf[n++] = static_cast<char>(0xC0 | (c >> 6));
            buf[n++] = static_cast<char>(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            buf[n++] = static_cast<char>(0xE0 | (c >> 12));
            buf[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            buf[n++] = static_cast<char>(0x80 | (c & 0x3F));
        } else if (c < 0x110000) {
            buf[n++] = static_cast<char>(0xF0 | (c >> 18));
            buf[n++] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
            buf[n++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
            buf[n++] = static_cast<char>(0x80 | (c & 0x3F));
        }
    }
    return {buf, n};
}

std::string_view ascii_of(const char* s) noexcept {
    if (s == nullptr) return {};
    return {s, ::strnlen(s, kMaxNameBytes)};
}

std::string_view message_of(const nvtxEventAttributes_t* a) noexcept {
    if (a == nullptr) return {};
    switch (a->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII: return ascii_of(a->message.ascii);
        case NVTX_MESSAGE_TYPE_UNICODE: return utf8_of(a->message.unicode);
        case NVTX_MESSAGE_TYPE_REGISTERED:
            return NvtxReceiver::instance().registered_string(
                reinterpret_cast<std::uintptr_t>(a->message.registered));
        default: return {};
    }
}

std::uint32_t domain_of(nvtxDomainHandle_t d) noexcept {
    return static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(d));
}

NvtxReceiver& rx() noexcept {
    return NvtxReceiver::instance();
}

// Tier-0 entry points: noexcept, no allocation, never throw into the caller's NVTX call.
void NVTX_API on_mark_ex(const nvtxEventAttributes_t* a) noexcept {
    rx().mark(0, message_of(a));
}
void NVTX_API on_mark_a(const char* m) noexcept {
    rx().mark(0, ascii_of(m));
}
void NVTX_API on_mark_w(const wchar_t* m) noexcept {
    rx().mark(0, utf8_of(m));
}
nvtxRangeId_t NVTX_API on_range_start_ex(const nvtxEventAttributes_t* a) noexcept {
    return rx().start(0, message_of(a));
}
nvtxRangeId_t NVTX_API on_range_start_a(const char* m) noexcept {
    return rx().start(0, ascii_of(m));
}
nvtxRangeId_t NVTX_API on_range_start_w(const wchar_t* m) noexcept {
    return rx().start(0, utf8_of(m));
}
void NVTX_API on_range_end(nvtxRangeId_t id) noexcept {
    rx().end(id);
}
int NVTX_API on_range_push_ex(const nvtxEventAttributes_t* a) noexcept {
    return rx().push(0, message_of(a));
}
int NVTX_API on_range_push_a(const char* m) noexcept {
    return rx().push(0, ascii_of(m));
}
int NVTX_API on_range_push_w(const wchar_t* m) noexcept {
    return rx().push(0, utf8_of(m));
}
int NVTX_API on_range_pop() noexcept {
    return rx().pop(0);
}

void NVTX_API on_domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) noexcept {
    rx().mark(domain_of(d), message_of(a));
}
nvtxRangeId_t NVTX_API on_domain_range_start_ex(nvtxDomainHandle_t d,
                                                const nvtxEventAttributes_t* a) noexcept {
    return rx().start(domain_of(d), message_of(a));
}
void NVTX_API on_domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) noexcept {
    rx().end(id);
}
int NVTX_API on_domain_range_push_ex(nvtxDomainHandle_t d,
                                     const nvtxEventAttributes_t* a) noexcept {
    return rx().push(domain_of(d), message_of(a));
}
int NVTX_API on_domain_range_pop(nvtxDomainHandle_t d) noexcept {
    return rx().pop(domain_of(d));
}
nvtxStringHandle_t NVTX_API on_domain_register_string_a(nvtxDomainHandle_t,
                                                        const char* s) noexcept {
    return reinterpret_cast<nvtxStringHandle_t>(rx().register_string(ascii_of(s)));
}
nvtxStringHandle_t NVTX_API on_domain_register_string_w(nvtxDomainHandle_t,
                                                        const wchar_t* s) noexcept {
    return reinterpret_cast<nvtxStringHandle_t>(rx().register_string(utf8_of(s)));
}
nvtxDomainHandle_t NVTX_API on_domain_create_a(const char* name) noexcept {
    return reinterpret_cast<nvtxDomainHandle_t>(
        static_cast<std::uintptr_t>(rx().create_domain(ascii_of(name))));
}
nvtxDomainHandle_t NVTX_API on_domain_create_w(const wchar_t* name) noexcept {
    return reinterpret_cast<nvtxDomainHandle_t>(
        static_cast<std::uintptr_t>(rx().create_domain(utf8_of(name))));
}
void NVTX_API on_domain_destroy(nvtxDomainHandle_t) noexcept {}  // handles stay valid: bounded

template <typename Fn>
void set_slot(NvtxFunctionTable table, unsigned size, unsigned id, Fn fn) noexcept {
    if (table != nullptr && id <= size && table[id] != nullptr) {
        *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
    }
}

}  // namespace

int NvtxReceiver::install(const void* get_export_table) noexcept {
    try {
        auto get = reinterpret_cast<NvtxGetExportTableFunc_t>(const_cast<void*>(get_export_table));
        if (get == nullptr) return 0;
        const auto* callbacks =
            static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
        if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
            callbacks->GetModuleFunctionTable == nullptr) {
            return 0;
        }
        NvtxFunctionTable core = nullptr;
        unsigned core_size = 0;
        if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
            core == nullptr) {
            return 0;
        }
        set_slot(core, core_size, NVTX_CBID_CORE_MarkEx, &on_mark_ex);
        set_slot(core, core_size, NVTX_CBID_CORE_MarkA, &on_mark_a);
        set_slot(core, core_size, NVTX_CBID_CORE_MarkW, &on_mark_w);
        set_slot(core, core_size, NVTX_CBID_CORE_RangeStartEx, &on_range_start_ex);
        set_slot(core, core_size, NVTX_CBID_CORE_RangeStartA, &on_range_start_a);
        set_slot(core, core_size, NVTX_CBID_CORE_RangeStartW, &on_range_start_w);
        set_slot(core, core_size, NVTX_CBID_CORE_RangeEnd, &on_range_end);
        set_slot(core, core_size, NVTX_CBID_CORE_RangePushEx, &on_range_push_ex);
        set_slot(core, core_size, NVTX_CBID_CORE_RangePushA, &on_range_push_a);
        set_slot(core, core_size, NVTX_CBID_CORE_RangePushW, &on_range_push_w);
        set_slot(core, core_size, NVTX_CBID_CORE_RangePop, &on_range_pop);
        NvtxFunctionTable core2 = nullptr;
        unsigned core2_size = 0;
        if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0 &&
            core2 != nullptr) {
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, &on_domain_mark_ex);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx,
                     &on_domain_range_start_ex);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &on_domain_range_end);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx,
                     &on_domain_range_push_ex);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &on_domain_range_pop);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA,
                     &on_domain_register_string_a);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW,
                     &on_domain_register_string_w);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &on_domain_create_a);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &on_domain_create_w);
            set_slot(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &on_domain_destroy);
        }
        impl_->modules.fetch_add(1, std::memory_order_relaxed);
        return 1;
    } catch (...) {
        return 0;
    }
}

#else

int NvtxReceiver::install(const void*) noexcept {
    return 0;
}

#endif  // GPUDIAG_HAVE_CUDA_HEADERS

}  // namespace gpudiag::detail
