// Errors as values live in the base layer (base/status.h), below every stage.
#pragma once

#include "base/status.h"
