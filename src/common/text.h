// Text that came from outside (names and strings in a model, paths, option values) made
// safe for where it is shown: a terminal line, JSON, HTML or a shell command.
#pragma once

#include <string>

namespace bulkhead {

// For a terminal or a log line: control bytes (newline, escape, DEL ...) and bytes that
// are not valid UTF-8 become "\xNN"; valid UTF-8 text, including non-ASCII, is kept.
std::string printable(const std::string& s);

// Valid UTF-8 for JSON: each byte that is not part of a valid UTF-8 sequence becomes the
// text "\xNN" (control characters are left to the JSON writer, which escapes them).
std::string valid_utf8(const std::string& s);

// For HTML text and attribute values: & < > " ' escaped, and valid_utf8().
std::string html_escape(const std::string& s);

// One POSIX shell word that stands for exactly `s`: single-quoted, each ' written as '\''.
std::string shell_quote(const std::string& s);

}  // namespace bulkhead
