// lib/base/text.h: sizes as people write them ("2GiB", "64k") and read them ("1.50 GiB"),
// and the one escaping policy for text that shows bytes from a segment (structure and
// segment names may hold any byte but NUL).
//
// parse_size/format_size are public through include/shmfilter/segment.hpp (the same
// declarations); the escapes are public through include/shmfilter/text.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "shmfilter/text.hpp"  // the escapes (declared once, documented below)

namespace shmfilter {

// Parses "2GiB", "512MiB", "64k", "1.5G", "4096" into bytes. Throws kInvalidArgument.
uint64_t parse_size(std::string_view text);
// Formats bytes as "1.50 GiB".
std::string format_size(uint64_t bytes);

// ---- output encoding (docs/SECURITY.md, "Output encoding") ----------------------------
// Every text output that shows bytes it did not write itself goes through one of the
// escapes declared in include/shmfilter/text.hpp (included above, so a file may include
// both headers): shmtool's human lines (escape_text), its --json (escape_json), the
// Prometheus text (escape_label), the C API's messages and Python's text. Each result is
// valid UTF-8 holding no control character, whatever the input:
// - valid_utf8 / utf8_sequence: strict UTF-8 (RFC 3629): no overlong forms, no surrogates
//   (ED A0..BF xx), nothing above U+10FFFF (F4 90.. and F5..FF lead bytes), no stray
//   continuation bytes.
// - escape_text (terminals and logs): printable ASCII and valid UTF-8 stay as they are; a
//   backslash becomes \\, and control bytes (00-1F, 7F), the C1 controls (U+0080-U+009F),
//   the bidi overrides (U+202A-U+202E, U+2066-U+2069) and each byte of an invalid sequence
//   become \xNN. Reversible: two different names never show the same. With keep_newlines,
//   \n and \t pass (for multi-line messages).
// - escape_json: the body of a JSON string: \", \\, and what escape_text escapes as
//   \u00XX / \uXXXX (lossless); each byte of an invalid sequence as U+FFFD (JSON text is
//   UTF-8: callers that need the bytes add them in hex, e.g. list --json's "name_hex").
// - escape_label: a Prometheus label value (text format 0.0.4, without the quotes):
//   escape_text's form, then \\ and \" as the format asks. After the scraper unescapes
//   it the label reads exactly as `shmtool list` shows the name.
// - hex_bytes: lower-case hex of the bytes ("eda080").

namespace internal {
// Input text as an error message quotes it: at most `max` bytes, then
// "... (N bytes)", so a rejected 3 MB line never floods stderr.
inline std::string clip(std::string_view text, size_t max = 64) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + std::to_string(text.size()) + " bytes)";
}
}  // namespace internal

}  // namespace shmfilter
