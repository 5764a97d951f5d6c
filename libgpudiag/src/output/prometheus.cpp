// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition of reports, the conventional way: one metric per quantity, the
// base unit in its name, the figure's declared unit deciding both (never its key), labels only
// for identity (host, rank, GPU), no sample for a figure the report does not have, and no
// duplicate series however many reports are exported together.
#include <gpudiag/report.hpp>

#include "output/units.hpp"

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Metric names allow [a-zA-Z0-9_:]; report keys are snake_case already, this keeps it so.
std::string metric_part(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!ok) c = '_';
    }
    return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "busy_ns" in ns -> "busy_seconds"; "idle_share" as a fraction -> "idle_ratio"; a key that is
// only its unit ("bytes") -> "bytes".
std::string metric_stem(std::string_view key, const detail::UnitTraits& unit) {
    for (std::string_view ending : unit.key_endings) {
        if (ending.empty()) continue;
        if (ends_with(key, ending)) {
            key.remove_suffix(ending.size());
            break;
        }
        if (key == ending.substr(1)) {
            key = {};
            break;
        }
    }
    std::string suffix(unit.base_suffix);
    if (key.empty()) return suffix.empty() ? std::string() : suffix.substr(1);
    return metric_part(key) + suffix;
}

std::string escape_label(std::string_view value) {
    std::string out;
    for (char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string escape_help(std::string_view text) {
    std::string out;
    for (char c : text) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
    return out;
}

std::string label_text(const Labels& labels) {
    if (labels.empty()) return {};
    std::string out = "{";
    for (const auto& [key, value] : labels) {
        if (out.size() > 1) out += ',';
        out += key + "=\"" + escape_label(value) + "\"";
    }
    return out + "}";
}

std::string number_text(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{}", v);
}

// Metric families in the order they first appear, each sample once per label set.
class Exposition {
public:
    void add(const std::string& name, const std::string& help, bool counter, const Labels& labels,
             double value) {
        if (std::isnan(value)) return;  // a figure without a value is not published as anything
        auto [it, added] = index_.try_emplace(name, families_.size());
        if (added) families_.push_back(Family{name, help, counter, {}, {}});
        Family& f = families_[it->second];
        std::string text = label_text(labels);
        if (!f.seen.insert(text).second) return;  // first report, rank or finding wins
        f.samples.push_back(name + text + " " + number_text(value) + "\n");
    }

    [[nodiscard]] std::string text() const {
        std::string out;
        for (const auto& f : families_) {
            out += "# HELP " + f.name + " " + escape_help(f.help) + "\n";
            out += "# TYPE " + f.name + (f.counter ? " counter\n" : " gauge\n");
            for (const auto& s : f.samples) out += s;
        }
        return out;
    }

private:
    struct Family {
        std::string name;
        std::string help;
        bool counter;
        std::set<std::string> seen;
        std::vector<std::string> samples;
    };
    std::vector<Family> families_;
    std::map<std::string, std::size_t> index_;
};

// dcgm-exporter's labels for one GPU, those the source knows.
Labels gpu_labels(const SourceInfo& source, int device) {
    Labels out;
    if (device < 0) return out;
    out.emplace_back("gpu", fmt::to_string(device));
    for (const auto& d : source.devices) {
        if (d.ordinal != device) continue;
        // A MIG instance is labelled as dcgm-exporter labels it: its GPU's UUID and GPU_I_ID.
        const std::string& uuid = d.parent_uuid.empty() ? d.uuid : d.parent_uuid;
        if (!uuid.empty()) out.emplace_back("UUID", uuid);
        if (!d.pci_bus_id.empty()) out.emplace_back("pci_bus_id", d.pci_bus_id);
        if (!d.name.empty()) out.emplace_back("modelName", d.name);
        if (d.gpu_instance >= 0) out.emplace_back("GPU_I_ID", fmt::to_string(d.gpu_instance));
    }
    return out;
}

Labels operator+(Labels a, const Labels& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// The device a section's figures describe: the one its device-ordinal figure names, else the
// source's only device; -1 when they are about several (or none).
int section_device(const Section& s, const SourceInfo& source) {
    for (const auto& f : s.figures) {
        if (f.unit == Unit::kDevice && std::isfinite(f.value) && f.value >= 0) {
            return static_cast<int>(f.value);
        }
    }
    return source.devices.size() == 1 ? source.devices.front().ordinal : -1;
}

void add_figure(Exposition& out, const std::string& prefix, const std::string& help_suffix,
                const Figure& f, const Labels& labels) {
    const detail::UnitTraits& unit = detail::unit_traits(f.unit);
    if (unit.kind != detail::UnitClass::kQuantity) return;  // names, codes, unknown units
    bool counter = f.kind == FigureKind::kTotal;
    std::string stem = metric_stem(f.key, unit);
    if (stem.empty()) return;  // a plain number without a key to name it
    std::string name = prefix + stem + (counter ? "_total" : "");
    std::string help = (f.label.empty() ? f.key : f.label) + help_suffix;
    out.add(name, help, counter, labels, f.value * unit.to_base);
}

void add_findings(Exposition& out, const Report& r, const Labels& base) {
    for (const auto& severity : enum_names<Severity>()) {
        double n = 0;
        for (const auto& f : r.findings) n += f.severity == severity.value ? 1 : 0;
        out.add("gpudiag_findings", "Findings of the diagnosis, by severity.", false,
                base + Labels{{"severity", severity.name}}, n);
    }
    for (const auto& f : r.findings) {
        Labels labels = base + gpu_labels(r.source, f.device);
        out.add("gpudiag_finding", "1 for each finding of the diagnosis, by id and severity.",
                false, labels + Labels{{"id", f.id}, {"severity", severity_name(f.severity)}}, 1);
        for (const auto& fig : f.figures) {
            add_figure(out, "gpudiag_finding_" + metric_part(f.id) + "_", " (finding " + f.id + ")",
                       fig, labels);
        }
        for (const auto& fig : f.predicted_saving) {
            add_figure(out, "gpudiag_finding_" + metric_part(f.id) + "_predicted_",
                       " (finding " + f.id + ", predicted when fixed)", fig, labels);
        }
    }
}

void add_report(Exposition& out, const Report& r, const Labels& base) {
    if (r.ranks.empty()) {  // a job's capture counts are its ranks'
        out.add("gpudiag_capture_events_total", "Events the analysis received.", true, base,
                static_cast<double>(r.capture.events));
        out.add("gpudiag_capture_dropped_events_total",
                "Events lost to full capture buffers or skipped on import.", true, base,
                static_cast<double>(r.capture.dropped));
    }
    add_findings(out, r, base);
    for (const auto& fig : r.fix_all_saving) {
        add_figure(out, "gpudiag_fix_all_", " (every cause found removed together)", fig, base);
    }
    // What the input could show: a dashboard tells "no finding" from "not observed".
    if (r.observed_known) {
        for (const auto& kind : enum_names<Evidence>()) {
            out.add("gpudiag_evidence_observed",
                    "1 when the input had this kind of evidence (steps, input waits, GPU "
                    "activity, device memory, device health), 0 when it could not show its "
                    "problems.",
                    false, base + Labels{{"kind", kind.name}}, r.saw(kind.value) ? 1 : 0);
        }
    }
    for (const auto& s : r.sections) {
        Labels labels = base + gpu_labels(r.source, section_device(s, r.source));
        std::string prefix = "gpudiag_" + metric_part(s.id) + "_";
        for (const auto& f : s.figures) add_figure(out, prefix, " (" + s.title + ")", f, labels);
    }
}

// One entry per report to export: a job's own report, then each of its ranks.
struct Exported {
    const Report* report;
    Labels labels;
};

// The host under the names dcgm-exporter has used: a dashboard joins on the one its exporter
// writes (4.8.3 renamed `Hostname` to `hostname`).
Labels identity(const Report& r, const PrometheusOptions& options) {
    Labels out;
    if (!r.source.hostname.empty()) {
        if (options.legacy_hostname_label) out.emplace_back("Hostname", r.source.hostname);
        if (options.hostname_label) out.emplace_back("hostname", r.source.hostname);
    }
    if (r.source.rank >= 0) out.emplace_back("rank", fmt::to_string(r.source.rank));
    return out;
}

// Gives reports whose labels would collide a `source` label (their description, numbered when
// that is shared too), so Prometheus never sees one series twice.
void tell_apart(std::vector<Exported>& units) {
    auto collide = [&] {
        std::set<std::string> seen;
        for (const auto& u : units) {
            if (!seen.insert(label_text(u.labels)).second) return true;
        }
        return false;
    };
    if (!collide()) return;
    std::map<std::string, int> uses;
    for (const auto& u : units) ++uses[u.report->source.description];
    std::map<std::string, int> seen;
    for (auto& u : units) {
        std::string source = u.report->source.description;
        if (uses[source] > 1) source += fmt::format(" #{}", ++seen[source]);
        u.labels.insert(u.labels.begin(), {"source", source});
    }
}

std::string render(const std::vector<const Report*>& reports, const PrometheusOptions& options) {
    std::vector<Exported> units;
    for (const Report* r : reports) {
        units.push_back({r, identity(*r, options)});
        for (const auto& rank : r->ranks) units.push_back({&rank, identity(rank, options)});
    }
    tell_apart(units);
    Exposition out;
    for (const auto& u : units) add_report(out, *u.report, u.labels);
    return out.text();
}

}  // namespace

std::string render_prometheus(const Report& report) noexcept {
    return render_prometheus(report, PrometheusOptions{});
}

std::string render_prometheus(const std::vector<Report>& reports) noexcept {
    return render_prometheus(reports, PrometheusOptions{});
}

std::string render_prometheus(const Report& report, const PrometheusOptions& options) noexcept {
    try {
        return render({&report}, options);
    } catch (...) {  // only std::bad_alloc can get here
        return {};
    }
}

std::string render_prometheus(const std::vector<Report>& reports,
                              const PrometheusOptions& options) noexcept {
    try {
        std::vector<const Report*> all;
        all.reserve(reports.size());
        for (const auto& r : reports) all.push_back(&r);
        return render(all, options);
    } catch (...) {
        return {};
    }
}

}  // namespace gpudiag
