// Output files are written to a temporary name in the same directory and renamed into place, so
// a failed or interrupted run never leaves a truncated file.
#pragma once

#include <string>

namespace fp8a {

// Creates dir (and parents) when missing. Throws input error fp8a.io.104 naming the directory.
void ensure_output_directory(const std::string& dir);

// Throws input error fp8a.io.104 naming the file on any failure; the temporary file is removed.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace fp8a
