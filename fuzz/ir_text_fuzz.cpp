// The IR text parser, graphs and programs. A text that parses must print to a text
// that parses back to the same print (ir/parser.h promises print(parse(print(g))) ==
// print(g)).
#include "ir/parser.h"
#include "ir/printer.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto g = strata::parse_graph(text)) {
    const std::string printed = strata::print_graph(*g);
    auto again = strata::parse_graph(printed);
    if (!again || strata::print_graph(*again) != printed) std::abort();
  }
  if (auto p = strata::parse_program(text)) {
    const std::string printed = strata::print_program(*p);
    auto again = strata::parse_program(printed);
    if (!again || strata::print_program(*again) != printed) std::abort();
  }
  return 0;
}
