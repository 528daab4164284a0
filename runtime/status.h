// Errors as values for the runtime: Status, Expected<T>, error(), and the
// STRATA_RETURN_IF_ERROR / STRATA_ASSIGN_OR_RETURN macros.
//
// Why this includes an ir/ header although runtime/ must not depend on ir/:
// ir/status.h is header-only and depends on nothing but fmt and the standard
// library, so including it creates no link dependency on strata_ir and no coupling
// to the IR's types. Sharing it (rather than copying it) keeps a single Status type
// across the project, so codegen and the CLI can pass runtime errors straight
// through. Include this header, never any other ir/ header, from runtime/.
#pragma once

#include "ir/status.h"  // header-only; see above

namespace strata::runtime {

using strata::error;
using strata::Expected;
using strata::Status;

}  // namespace strata::runtime
