// Errors as values, for every layer (base/ depends on nothing but fmt and the
// standard library): Status (ok or an error message) and Expected<T> (a value or an
// error). Library code never calls exit() and never throws across its public API;
// every failure is returned with a message that names what failed and why, e.g.
// "safetensors 'vae.st': tensor 'decoder.conv_in.weight': offsets [0, 96) overlap ...".
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace strata {

class [[nodiscard]] Status {
public:
  Status() = default;  // ok
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    return s;
  }
  bool is_ok() const { return !message_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const {
    static const std::string kOk = "ok";
    return message_ ? *message_ : kOk;
  }
  // Prefixes the message with context ("loading vae/: " + message); no-op when ok.
  Status with_context(const std::string& context) const {
    return is_ok() ? *this : error(context + ": " + *message_);
  }

private:
  std::optional<std::string> message_;
};

// fmt-style error construction: return error("tensor '{}' missing", name);
template <typename... Args>
Status error(fmt::format_string<Args...> f, Args&&... args) {
  return Status::error(fmt::format(f, std::forward<Args>(args)...));
}

template <typename T>
class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }

  bool has_value() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  Status status() const { return has_value() ? Status::ok() : std::get<Status>(v_); }
  const std::string& message() const { return std::get<Status>(v_).message(); }

private:
  std::variant<T, Status> v_;
};

}  // namespace strata

// Propagate a failed Status / Expected from the enclosing function.
#define STRATA_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::strata::Status strata_status_ = (expr);     \
    if (!strata_status_.is_ok()) return strata_status_; \
  } while (0)

#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)
// STRATA_ASSIGN_OR_RETURN(auto x, expected_expr);
#define STRATA_ASSIGN_OR_RETURN(lhs, expr) \
  STRATA_ASSIGN_OR_RETURN_IMPL(STRATA_CONCAT(strata_expected_, __LINE__), lhs, expr)
#define STRATA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.has_value()) return tmp.status();         \
  lhs = std::move(tmp).value()
