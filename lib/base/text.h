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

namespace shmfilter {

// Parses "2GiB", "512MiB", "64k", "1.5G", "4096" into bytes. Throws kInvalidArgument.
uint64_t parse_size(std::string_view text);
// Formats bytes as "1.50 GiB".
std::string format_size(uint64_t bytes);

// ---- output encoding (docs/SECURITY.md, "Output encoding") ----------------------------
// Every text output that shows bytes it did not write itself goes through one of these:
// shmtool's human lines (escape_text), its --json (escape_json), the Prometheus text
// (escape_label), the C API's and Python's text. Each result is valid UTF-8 holding no
// control character, whatever the input.
//
// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates (ED A0..BF xx), nothing above
// U+10FFFF (F4 90.. and F5..FF lead bytes), no stray continuation bytes.
bool valid_utf8(std::string_view s) noexcept;
// Bytes of the valid UTF-8 sequence starting at s[i] (1..4), 0 when none starts there.
size_t utf8_sequence(std::string_view s, size_t i) noexcept;
// For terminals and logs: printable ASCII and valid UTF-8 stay as they are; a backslash
// becomes \\, and control bytes (00-1F, 7F), the C1 controls (U+0080-U+009F), the bidi
// overrides (U+202A-U+202E, U+2066-U+2069) and each byte of an invalid sequence become
// \xNN. Reversible: two different names never show the same. With keep_newlines, \n
// and \t pass (for multi-line messages).
std::string escape_text(std::string_view s, bool keep_newlines = false);
// The body of a JSON string (without the quotes): \", \\, control characters and the
// code points escape_text escapes as \u00XX / \uXXXX (lossless), other valid UTF-8 as is,
// and each byte of an invalid sequence as U+FFFD (JSON text is UTF-8: the byte cannot be
// carried; callers that need it add the bytes in hex, e.g. list --json's "name_hex").
std::string escape_json(std::string_view s);
// A Prometheus label value (text format 0.0.4, without the quotes): escape_text's form,
// then \\ and \" as the format asks. After the scraper unescapes it the label reads
// exactly as `shmtool list` shows the name: valid UTF-8 always, distinct for distinct names.
std::string escape_label(std::string_view s);
// Lower-case hex of the bytes ("eda080").
std::string hex_bytes(std::string_view s);

namespace internal {
// Input text as an error message quotes it: at most `max` bytes, then
// "... (N bytes)", so a rejected 3 MB line never floods stderr.
inline std::string clip(std::string_view text, size_t max = 64) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" + std::to_string(text.size()) + " bytes)";
}
}  // namespace internal

}  // namespace shmfilter
