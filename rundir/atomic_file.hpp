// Output files are written to a temporary name in the same directory and renamed into place, so
// a failed or interrupted run never leaves a truncated file.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace fp8a {

// Creates dir (and parents) when missing. Throws input error fp8a.io.104 naming the directory.
void ensure_output_directory(const std::string& dir);

// Throws input error fp8a.io.104 naming the file on any failure; the temporary file is removed.
void write_file_atomically(const std::string& path, const std::string& contents);

// The same for contents made in pieces: produce(put) calls put with each piece in order, written
// as it comes (a file of gigabytes is never held whole).
using ByteSink = std::function<void(std::string_view)>;
void write_file_atomically(const std::string& path, const std::function<void(const ByteSink&)>& produce);

// The contents of path if it is a regular file, read without following a symbolic link or
// waiting on a FIFO (O_NOFOLLOW | O_NONBLOCK, then fstat); unset for anything else or a read
// error. For the files of a run folder (checkpoint units, manifests, the output set), which the
// run itself wrote as regular files: anything else in their place is not theirs.
std::optional<std::string> read_regular_file(const std::string& path);

}  // namespace fp8a
