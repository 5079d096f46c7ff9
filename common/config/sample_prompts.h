// kohya sd-scripts' sample-prompt files (--sample_prompts; train_util.load_prompts and
// line_to_prompt_dict): a .txt file with one prompt per line (blank lines and lines starting
// with '#' skipped) and inline options after " --":
//   --n <negative prompt>  --w <width>  --h <height>  --d <seed>  --s <steps>  --l <CFG scale>
//   --ss <sampler>
// a .toml file with a [prompt] table of defaults and [[prompt.subset]] entries, or a .json
// list of objects (or of prompt lines), both with kohya's keys prompt, negative_prompt, width,
// height, seed, sample_steps, scale, sample_sampler. Defaults as kohya's sample_image_inference:
// 512 x 512, 30 steps, scale 7.5, no negative prompt, no seed (lorafleet then derives one from
// the job's seed and the prompt's index, so that samples are reproducible).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lf {

struct SamplePrompt {
  int index = 0;  // kohya's "enum": the position in the file, in the image names
  std::string prompt;
  std::string negative_prompt;
  int width = 512;        // rounded down to a multiple of 8, at least 64 (kohya)
  int height = 512;       // same
  int sample_steps = 30;  // clamped to [1, 1000] (kohya)
  double scale = 7.5;     // classifier-free guidance scale
  std::optional<std::int64_t> seed;
  std::string sampler;  // "" = the job's output.sample_sampler
  int line = 0;         // 1-based source line (txt and toml; 0 for json)
};

// kohya's --sample_sampler names lorafleet samples with (worker/core/sample/sigma_schedule.h
// implements them; a test keeps the lists equal): ddim, euler, k_euler, euler_a, k_euler_a,
// dpmsolver++, k_dpm_2, dpm_2.
const std::vector<std::string>& sample_sampler_names();

// Parses the text of the file `path` by its extension (.txt, .toml, .json). Throws
// std::runtime_error "<path>:<line>: <problem>" for an unknown option or key, a value that is
// not a number where one is expected, an empty prompt, a --ss / sample_sampler not in
// sample_sampler_names() (the message lists them), or an unknown extension; a file with no
// prompt at all is an error too. The coordinator reads the file and sends its text to the workers,
// so it need not exist on their hosts.
std::vector<SamplePrompt> parse_sample_prompts(const std::string& text, const std::string& path);
// The whole file; throws std::runtime_error "<path>: cannot read the sample prompts file".
std::string read_sample_prompts_file(const std::string& path);
// read_sample_prompts_file + parse_sample_prompts.
std::vector<SamplePrompt> load_sample_prompts(const std::string& path);

// Parses one .txt line (kohya line_to_prompt_dict); `where` ("<path>:<line>") prefixes errors.
SamplePrompt parse_sample_prompt_line(const std::string& line, const std::string& where);

}  // namespace lf
