// shmfilter/text.hpp: the one escaping policy for text that shows bytes from a segment.
//
// Structure and segment names may hold any byte but NUL. Every text output of the
// library and its tools shows them through one of these (docs/SECURITY.md, "Output
// encoding"): each result is valid UTF-8 holding no control character, whatever the
// input, so one odd name cannot drive a terminal, break a JSON parser or a Prometheus
// scrape. lib/base/text.h (which documents each rule) includes this header.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace shmfilter {

// Strict UTF-8 (RFC 3629): no overlong forms, surrogates, code points above U+10FFFF.
bool valid_utf8(std::string_view s) noexcept;
// Bytes of the valid UTF-8 sequence starting at s[i] (1..4), 0 when none starts there.
size_t utf8_sequence(std::string_view s, size_t i) noexcept;
// Terminals and logs: control bytes, C1 controls, bidi overrides and each byte of an
// invalid sequence as \xNN, a backslash as \\ (reversible); with keep_newlines \n and \t pass.
std::string escape_text(std::string_view s, bool keep_newlines = false);
// The body of a JSON string: lossless for valid UTF-8; an invalid byte becomes U+FFFD.
std::string escape_json(std::string_view s);
// A Prometheus label value: after unescaping it reads as escape_text shows the name.
std::string escape_label(std::string_view s);
// Lower-case hex of the bytes.
std::string hex_bytes(std::string_view s);

}  // namespace shmfilter
