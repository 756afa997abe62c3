// shmtool/cli/report.h: how info and create commands show an object: aligned
// "label  value" lines for people, or one JSON object with --json.
#pragma once

#include <string>

#include "cli/json.h"

namespace shmtool {

// Text: one "key  value" line per top-level member, values aligned, strings
// unquoted, nested objects as compact JSON, arrays (add_array) as a table under
// their label. JSON: obj on one line.
void print_report(const Json& obj, bool json);

// {"name":"n","a":1,"b":"x","c":{...}} -> a=1 b=x c={...}: a describer's object
// as list/dump summarise it (name and kind left out: the row shows them; strings
// unquoted when they hold no space).
std::string one_line(const Json& obj);

}  // namespace shmtool
