#include "rdmad/base/log_fields.h"

#include <gtest/gtest.h>

namespace rdmad::base {
namespace {

TEST(LogFields, OneTokenStaysBare) {
  EXPECT_EQ(quote("mlx5_0"), "mlx5_0");
  EXPECT_EQ(quote("http://127.0.0.1:9842/metrics"), "http://127.0.0.1:9842/metrics");
  EXPECT_EQ(quote("/etc/rdmad/rdmad.toml"), "/etc/rdmad/rdmad.toml");
  EXPECT_EQ(quote("fe80::1"), "fe80::1");
}

TEST(LogFields, SpacesQuotesAndEqualsSignsAreQuoted) {
  EXPECT_EQ(quote("No such file or directory"), "\"No such file or directory\"");
  EXPECT_EQ(quote(""), "\"\"");
  // '=' would read as the start of another field to a logfmt parser.
  EXPECT_EQ(quote("a=b"), "\"a=b\"");
  EXPECT_EQ(quote("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(quote("C:\\x y"), "\"C:\\\\x y\"");
}

TEST(LogFields, ControlCharactersAreEscapedSoALineStaysOneLine) {
  EXPECT_EQ(quote("two\nlines"), "\"two\\nlines\"");
  EXPECT_EQ(quote("a\tb"), "\"a\\tb\"");
  EXPECT_EQ(quote(std::string_view("\x01", 1)), "\"\\x01\"");
  EXPECT_EQ(quote("\x7f"), "\"\\x7f\"");
}

TEST(LogFields, QFormatsAsQuoteInsideALine) {
  EXPECT_EQ(fmt::format("cannot bind path={} error={}", q("/run/x"), q("Address in use")),
            "cannot bind path=/run/x error=\"Address in use\"");
  // Width and alignment still apply (formatter<string_view> underneath).
  EXPECT_EQ(fmt::format("[{:>6}]", q("a b")), "[ \"a b\"]");
}

}  // namespace
}  // namespace rdmad::base
