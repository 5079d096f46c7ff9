// scrub_secrets: the values of secret-looking keys of a YAML / TOML text are replaced, file
// paths and everything else kept byte for byte.
#include <gtest/gtest.h>

#include "common/security/scrub_secrets.h"

namespace lf {
namespace {

TEST(ScrubSecrets, ReplacesSecretValuesOnly) {
  const std::string yaml =
      "coordinator:\n"
      "  job_token_file: /run/secrets/token\n"
      "  job_token: abc123\n"
      "model:\n"
      "  tokenizer_vocab: .deps/bpe.txt.gz\n"
      "output:\n"
      "  output_dir: out  # token: not a key\n"
      "# password: in a comment\n";
  EXPECT_EQ(scrub_secrets(yaml),
            "coordinator:\n"
            "  job_token_file: /run/secrets/token\n"
            "  job_token: <scrubbed>\n"
            "model:\n"
            "  tokenizer_vocab: .deps/bpe.txt.gz\n"
            "output:\n"
            "  output_dir: out  # token: not a key\n"
            "# password: in a comment\n");
  const std::string toml = "wandb_api_key = \"k-1\"\nhuggingface_token='t'\nseed = 42";
  EXPECT_EQ(scrub_secrets(toml),
            "wandb_api_key = <scrubbed>\nhuggingface_token=<scrubbed>\nseed = 42");
  EXPECT_EQ(scrub_secrets(""), "");
  EXPECT_EQ(scrub_secrets("Password:\n  x: 1\n"), "Password:\n  x: 1\n");
}

}  // namespace
}  // namespace lf
