#pragma once
// expect_throw_with: run a callable, expect an exception of type E whose message contains every
// given substring. Returns the message (empty when nothing or something else was thrown) so a
// test can check more.

#include <gtest/gtest.h>

#include <exception>
#include <initializer_list>
#include <string>
#include <utility>

namespace thdpack::test_util {

template <typename E, typename F>
std::string expect_throw_with(F&& body, std::initializer_list<std::string> needles) {
  std::string message;
  try {
    body();
    ADD_FAILURE() << "expected an exception, nothing was thrown";
    return message;
  } catch (const E& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected another exception type, got: " << e.what();
    return message;
  }
  for (const std::string& needle : needles) {
    EXPECT_NE(message.find(needle), std::string::npos)
        << "message \"" << message << "\" does not mention \"" << needle << "\"";
  }
  return message;
}

template <typename E, typename F>
std::string expect_throw_with(F&& body, const std::string& needle) {
  return expect_throw_with<E>(std::forward<F>(body), {needle});
}

}  // namespace thdpack::test_util
