// Helpers for the Prometheus text exposition format 0.0.4 (prometheus/docs exposition_formats.md):
// value formatting, label/HELP escaping, sample lines, name validation. Shared by the metric
// types, Family and Registry so every line is written one way.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace lf {
namespace metrics {

using Labels = std::map<std::string, std::string>;

// Go-parsable float: shortest round-trip decimal (std::to_chars), plain for decimal exponents
// -4..20 and scientific otherwise ("1234567", "0.125", "1e+21", "2.5e-07"); "NaN", "+Inf", "-Inf".
std::string FormatValue(double value);

// Label value escaping: backslash, double quote and newline become \\, \" and \n.
std::string EscapeLabelValue(const std::string& value);
// HELP text escaping: backslash and newline become \\ and \n.
std::string EscapeHelp(const std::string& help);

// Appends `name{k="v",...} value\n` (no braces when labels and extra label are empty). The extra
// label (histogram "le") is written last when extra_name is non-empty.
void AppendSample(std::string& out, const std::string& name, const Labels& labels,
                  const std::string& value, const std::string& extra_name = std::string(),
                  const std::string& extra_value = std::string());

// Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*. Label names: [a-zA-Z_][a-zA-Z0-9_]* not starting with
// "__" (reserved). Label values must be valid UTF-8 (the Prometheus parser rejects others).
bool IsValidMetricName(const std::string& name);
bool IsValidLabelName(const std::string& name);
bool IsValidUtf8(const std::string& text);

}  // namespace metrics
}  // namespace lf
