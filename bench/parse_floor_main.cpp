// SPDX-License-Identifier: Apache-2.0
// gpudiag_parse_floor: the floor for analysing a Kineto trace with gpudiag's libraries: inflate
// the file (libdeflate, zlib for what libdeflate cannot do) and parse the JSON with simdjson,
// touching nothing. Prints the two times.   gpudiag_parse_floor FILE [dom|ondemand]
#include "importers/kineto/trace_buffer.hpp"

#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <string>

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: gpudiag_parse_floor FILE [dom|ondemand]\n");
        return 2;
    }
    std::string mode = argc > 2 ? argv[2] : "dom";
    auto t0 = std::chrono::steady_clock::now();
    bool truncated = false;
    auto buffer = gpudiag::detail::load_trace_file(argv[1], &truncated, nullptr);
    if (!buffer.is_ok()) {
        std::fprintf(stderr, "%s\n", buffer.status().to_string().c_str());
        return 2;
    }
    auto t1 = std::chrono::steady_clock::now();
    std::size_t count = 0;
    if (mode == "dom") {
        simdjson::dom::parser parser;
        simdjson::dom::element doc;
        auto err = parser.parse(buffer->data(), buffer->size(), false).get(doc);
        if (err) {
            std::fprintf(stderr, "%s\n", simdjson::error_message(err));
            return 2;
        }
        simdjson::dom::array events;
        if (doc["traceEvents"].get_array().get(events) == simdjson::SUCCESS) count = events.size();
    } else {
        // On-Demand only parses what is visited: visit every event's every field.
        simdjson::ondemand::parser parser;
        auto doc = parser.iterate(buffer->data(), buffer->size(),
                                  buffer->capacity() + gpudiag::detail::TraceBuffer::kPadding);
        simdjson::ondemand::array events;
        if (doc["traceEvents"].get_array().get(events) == simdjson::SUCCESS) {
            for (auto e : events) {
                simdjson::ondemand::object o;
                if (e.get_object().get(o) != simdjson::SUCCESS) break;
                for (auto f : o) {
                    simdjson::ondemand::field field;
                    if (std::move(f).get(field) != simdjson::SUCCESS) break;
                    std::string_view raw = field.value().raw_json_token();
                    count += raw.size() > 0 ? 1 : 0;
                }
            }
        }
    }
    auto t2 = std::chrono::steady_clock::now();
    auto sec = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    std::printf("inflate_s %.3f parse_s %.3f total_s %.3f bytes %zu items %zu implementation %s\n",
                sec(t0, t1), sec(t1, t2), sec(t0, t2), buffer->size(), count,
                simdjson::get_active_implementation()->name().c_str());
    return 0;
}
