// Generations, rank slots, restart counting and leases (see header).
#include "coordinator/membership.h"

#include <algorithm>

#include "common/util/log.h"

namespace lf {

Membership::Membership(const MembershipOptions& options) : options_(options) {}

void Membership::fix_world_size(int world_size) {
  world_size_ = world_size;
  world_size_fixed_ = true;
  ranks_.assign(static_cast<std::size_t>(world_size_), Rank{});
}

void Membership::set_world_size(int world_size) {
  world_size_ = world_size;
  ranks_.assign(static_cast<std::size_t>(world_size_), Rank{});
}

void Membership::clear_world_size() {
  world_size_ = 0;
  ranks_.clear();
}

void Membership::set_rendezvous_deadline(std::optional<Clock::time_point> deadline) {
  rendezvous_deadline_ = deadline;
}

std::optional<Refusal> Membership::check_rank(int rank, const char* rpc) const {
  if (world_size_ == 0) {
    return Refusal{Refusal::Code::kFailedPrecondition,
                   std::string(rpc) + " from rank " + std::to_string(rank) +
                       " before any rank registered (world_size unknown)"};
  }
  if (rank < 0 || rank >= world_size_) {
    return Refusal{Refusal::Code::kInvalidArgument,
                   std::string(rpc) + ": rank " + std::to_string(rank) +
                       " is outside [0, world_size " + std::to_string(world_size_) + ")"};
  }
  return std::nullopt;
}

std::optional<Refusal> Membership::check_running_rank(int rank, const char* rpc) const {
  if (auto refused = check_rank(rank, rpc)) return refused;
  if (!running_) {
    return Refusal{Refusal::Code::kFailedPrecondition,
                   std::string(rpc) + " from rank " + std::to_string(rank) +
                       " before all ranks registered (" + std::to_string(registered_count()) +
                       " of " + std::to_string(world_size_) + ")"};
  }
  if (!ranks_[static_cast<std::size_t>(rank)].registered) {
    return Refusal{Refusal::Code::kFailedPrecondition,
                   std::string(rpc) + ": rank " + std::to_string(rank) +
                       " is not registered in generation " + std::to_string(generation_)};
  }
  return std::nullopt;
}

std::optional<Refusal> Membership::check_generation(std::uint64_t generation, int rank,
                                                    const char* rpc) const {
  if (generation == 0) return std::nullopt;  // a client that does not send it
  if (generation > generation_) {
    return Refusal{Refusal::Code::kFailedPrecondition,
                   std::string(rpc) + " from rank " + std::to_string(rank) +
                       " carries generation " + std::to_string(generation) +
                       ", but the newest generation is " + std::to_string(generation_)};
  }
  if (generation < generation_ || !running_) {
    const std::string why = generation < generation_ || registered_count() > 0
                                ? "generation " + std::to_string(generation) +
                                      " was superseded by " + std::to_string(generation + 1)
                                : "generation " + std::to_string(generation) + " ended (" +
                                      end_detail_ + "); waiting for generation " +
                                      std::to_string(generation + 1);
    return Refusal{Refusal::Code::kAborted,
                   std::string(rpc) + " from rank " + std::to_string(rank) + ": " + why};
  }
  return std::nullopt;
}

std::uint64_t Membership::register_rank(int rank, Rank info, Clock::time_point now) {
  Rank& me = ranks_.at(static_cast<std::size_t>(rank));
  me = std::move(info);
  me.registered = true;
  me.in_register = true;
  me.registration_id = next_registration_id_++;
  me.last_seen = now;
  return me.registration_id;
}

bool Membership::holds(int rank, std::uint64_t id) const {
  return rank >= 0 && rank < world_size_ &&
         ranks_[static_cast<std::size_t>(rank)].registration_id == id;
}

void Membership::withdraw(int rank) { ranks_.at(static_cast<std::size_t>(rank)) = Rank{}; }

int Membership::registered_count() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const Rank& s) { return s.registered; }));
}

std::string Membership::missing_ranks() const {
  std::string missing;
  std::size_t count = 0;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].registered) continue;
    if (++count <= 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  if (count > 16) missing += ", ... (" + std::to_string(count) + " in total)";
  return missing;
}

std::string Membership::complete_registration(Clock::time_point now) {
  running_ = true;
  ++generation_;
  for (Rank& s : ranks_) s.last_seen = now;
  std::string restart_cause;
  if (generation_ > 1) {
    restart_cause = end_cause_;
    const std::int64_t n = ++restarts_[restart_cause];
    LF_WARN("restart: generation "
            << generation_ << " formed after generation " << generation_ - 1 << " ended ("
            << restart_cause << ": " << end_detail_ << "); restarts for " << restart_cause << ": "
            << n << ", counted against " << restart_budget_key() << " " << counted_restarts()
            << " of " << restart_budget());
  }
  end_cause_.clear();
  end_detail_.clear();
  rendezvous_deadline_.reset();
  return restart_cause;
}

bool Membership::end_generation(const std::string& cause, const std::string& detail,
                                Clock::time_point now) {
  if (!running_) return false;
  end_cause_ = cause;
  end_detail_ = detail;
  running_ = false;
  for (Rank& s : ranks_) s = Rank{};
  rendezvous_deadline_ = now + options_.rendezvous_timeout;
  return true;
}

void Membership::set_launcher_budget(std::optional<int> max_restarts) {
  if (max_restarts) launcher_max_restarts_ = max_restarts;
}

int Membership::restart_budget() const {
  return launcher_max_restarts_.value_or(options_.max_restarts);
}

std::string Membership::restart_budget_key() const {
  return launcher_max_restarts_ ? "lorafleet-launch --max-restarts" : "cluster.max_restarts";
}

std::string Membership::restart_budget_hint() const {
  return launcher_max_restarts_ ? "lorafleet-launch --max-restarts (LF_MAX_RESTARTS)"
                                : "cluster.max_restarts in the job config";
}

std::int64_t Membership::counted_restarts() const {
  std::int64_t n = 0;
  for (const auto& [cause, count] : restarts_) {
    if (cause != "preemption") n += count;
  }
  return n;
}

std::int64_t Membership::restarts(const std::string& cause) const {
  const auto it = restarts_.find(cause);
  return it == restarts_.end() ? 0 : it->second;
}

bool Membership::next_restart_exceeds_budget() const {
  return generation_ > 0 && end_cause_ != "preemption" && counted_restarts() + 1 > restart_budget();
}

bool Membership::is_alive(int rank, Clock::time_point now) const {
  const Rank& s = ranks_.at(static_cast<std::size_t>(rank));
  return s.registered && !s.finished &&
         (s.in_register || now - s.last_seen <= options_.alive_window);
}

std::optional<int> Membership::expired_lease(Clock::time_point now) const {
  if (!running_) return std::nullopt;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const Rank& s = ranks_[r];
    if (s.registered && !s.finished && now - s.last_seen >= options_.worker_timeout) {
      return static_cast<int>(r);
    }
  }
  return std::nullopt;
}

std::vector<int> Membership::newly_stalled(Clock::time_point now) {
  std::vector<int> out;
  if (!running_) return out;
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    Rank& s = ranks_[r];
    if (!s.registered || s.finished || s.stall_warned) continue;
    if (now - s.last_seen >= options_.stall_warning) {
      s.stall_warned = true;
      out.push_back(static_cast<int>(r));
    }
  }
  return out;
}

bool Membership::all_finished() const {
  return std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.finished; });
}

void Membership::restore_counters(std::uint64_t generation,
                                  const std::map<std::string, std::int64_t>& n) {
  generation_ = generation;
  restarts_ = n;
}

void Membership::restore_running(Clock::time_point now) {
  running_ = true;
  for (Rank& s : ranks_) s.last_seen = now;  // leases restart: the workers had no one to talk to
}

void Membership::restore_ended(const std::string& cause, const std::string& detail,
                               Clock::time_point now) {
  end_cause_ = cause;
  end_detail_ = detail;
  rendezvous_deadline_ = now + options_.rendezvous_timeout;
}

}  // namespace lf
