// Writing a set of files all or nothing: every file is written to a temporary beside its
// final name, and only when all have been written are they renamed into place. A failure
// at any point (a full disk, a file size limit, a rename refused) removes every temporary
// and every file this set already put in place, so that a failed command leaves none of
// its outputs behind.
// Thread-compatible. remove_temporaries_on_signals() installs process-wide signal
// handlers and is meant for programs (the bulkhead CLI), not for libraries.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bulkhead/status.h"

namespace bulkhead::io {

// Writes `files` (path, bytes) all or nothing. Two entries with the same path are an
// error before anything is written.
Status write_files_all_or_nothing(const std::vector<std::pair<std::string, std::string>>& files);

// Makes SIGINT, SIGTERM, SIGHUP and SIGQUIT remove the temporaries of a
// write_files_all_or_nothing() in progress before the process ends as the signal says,
// and makes a write past the file size limit (RLIMIT_FSIZE) fail with an error instead of
// killing the process (SIGXFSZ ignored), so that its temporaries can be removed.
void remove_temporaries_on_signals();

// The file name an output called `name` gets: bytes other than letters, digits, '-', '_'
// and '.' become '_', and a leading '.' (or an empty name) gets a '_' before it, so that
// the name can never leave its folder or hide. Different names can map to one file name:
// callers check for that.
std::string safe_file_name(const std::string& name);

}  // namespace bulkhead::io
