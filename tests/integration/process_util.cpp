// Integration-test helpers (see header).
#include "tests/integration/process_util.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lf::test {

RunResult run(const std::string& cmd) {
  RunResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr) r.output += buf.data();
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  return r;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {
// The newest step-* directory name under root for which `keep` holds ("" when none).
template <class Keep>
std::string newest_step_dir(const std::string& root, Keep&& keep) {
  std::string best;
  if (!std::filesystem::is_directory(root)) return best;
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && n > best && keep(e.path())) best = n;
  }
  return best;
}
}  // namespace

std::string newest_checkpoint(const std::string& root) {
  return newest_step_dir(root, [](const std::filesystem::path&) { return true; });
}

std::string newest_committed_checkpoint(const std::string& root) {
  return newest_step_dir(root, [](const std::filesystem::path& p) {
    return std::filesystem::exists(p / "COMMITTED");
  });
}

std::string mpirun(int np) {
  std::string cmd = "mpirun -np " + std::to_string(np) + " --oversubscribe --bind-to none";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

void copy_demo_photos(const std::string& demo_dir, const std::string& dir) {
  const std::filesystem::path to = std::filesystem::path(dir) / "train/2_photo";
  std::filesystem::create_directories(to);
  for (const char* stem : {"astronaut", "chelsea", "coffee"}) {
    for (const char* ext : {".png", ".txt"}) {
      std::filesystem::copy_file(demo_dir + "/train/10_photo/" + stem + ext,
                                 to / (std::string(stem) + ext));
    }
  }
}

void copy_demo_reg_photos(const std::string& demo_dir, const std::string& dir) {
  const std::filesystem::path to = std::filesystem::path(dir) / "reg/1_grey";
  std::filesystem::create_directories(to);
  for (const char* f : {"camera.png", "coins.png"}) {
    std::filesystem::copy_file(demo_dir + "/reg/1_photo/" + f, to / f);
  }
}

RunResult make_tiny_checkpoint(const std::string& make_checkpoint_bin, const std::string& path) {
  return run(make_checkpoint_bin + " --architecture tiny --seed 7 --output " + path);
}

}  // namespace lf::test
