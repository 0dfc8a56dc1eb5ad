#pragma once

#include <string>
#include <string_view>

namespace sandgate::test {

// Content codings as an origin writes them (zlib and libbrotlienc), for scrubber tests and
// fake origins that compress whatever Accept-Encoding says.
std::string gzip_encode(std::string_view plain);          // Content-Encoding: gzip
std::string zlib_deflate_encode(std::string_view plain);  // deflate as RFC 9110 has it
std::string raw_deflate_encode(std::string_view plain);   // deflate as some servers send it
std::string brotli_encode(std::string_view plain);        // br

}  // namespace sandgate::test
