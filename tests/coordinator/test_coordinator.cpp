// Coordinator tests: proto conversion, the job schedule, and the gRPC service end to end
// in-process (2 client threads as ranks 0 and 1, /metrics over HTTP, promtool lint), on a tiny
// kohya-style dataset copied from scikit-image's sample photos.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <opencv2/imgcodecs.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/checkpoint/checkpoint_layout.h"
#include "common/checkpoint/train_position.h"
#include "common/config/job_config.h"
#include "common/data/epoch_plan.h"
#include "common/io/safetensors.h"
#include "coordinator/job.h"
#include "coordinator/plan_bytes_cache.h"
#include "coordinator/resume_point.h"
#include "coordinator/server.h"
#include "coordinator/state_store.h"
#include "lorafleet/v1/coordinator.grpc.pb.h"
#include "proto/proto_convert.h"
#include "tests/support/fake_checkpoint.h"

namespace fs = std::filesystem;
namespace pb = lorafleet::v1;

namespace lf {
namespace {

const char* kPhotos = LF_SOURCE_DIR "/.deps/skimage/usr/lib/python3/dist-packages/skimage/data";

void copy_image(const std::string& name, const fs::path& dir, const std::string& caption) {
  fs::create_directories(dir);
  const cv::Mat img = cv::imread(std::string(kPhotos) + "/" + name, cv::IMREAD_UNCHANGED);
  ASSERT_FALSE(img.empty()) << "cannot read sample photo " << name;
  const fs::path stem = dir / fs::path(name).stem();
  ASSERT_TRUE(cv::imwrite(stem.string() + ".png", img));
  if (!caption.empty()) std::ofstream(stem.string() + ".txt") << caption << "\n";
}

// The tiny dataset, built once: train/2_photo (3 colour photos with captions) and reg/1_grey
// (3 grey photos, no captions).
class CoordinatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/lf_coordinator_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = new fs::path(tmpl);
    copy_image("astronaut.png", *root_ / "train/2_photo", "a photo of sks astronaut");
    copy_image("chelsea.png", *root_ / "train/2_photo", "a photo of sks cat");
    copy_image("coffee.png", *root_ / "train/2_photo", "a photo of sks coffee");
    copy_image("camera.png", *root_ / "reg/1_grey", "");
    copy_image("moon.png", *root_ / "reg/1_grey", "");
    copy_image("coins.png", *root_ / "reg/1_grey", "");
    // The coordinator only validates the checkpoint's header (an empty safetensors file is
    // valid) and that the vocabulary exists; workers load them.
    {
      std::ofstream f(*root_ / "model.safetensors", std::ios::binary);
      const char header_len[8] = {8, 0, 0, 0, 0, 0, 0, 0};
      f.write(header_len, 8);
      f << "{}      ";
    }
    std::ofstream(*root_ / "vocab.txt.gz") << "placeholder";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
    root_ = nullptr;
  }

  static std::string yaml(const std::string& training_extra = "") {
    const std::string r = root_->string();
    return "model:\n"
           "  pretrained_model_name_or_path: " + r + "/model.safetensors\n"
           "  tokenizer_vocab: " + r + "/vocab.txt.gz\n"
           "dataset:\n"
           "  train_data_dir: " + r + "/train\n"
           "  reg_data_dir: " + r + "/reg\n"
           "  resolution: 256\n"
           "  min_bucket_reso: 128\n"
           "  max_bucket_reso: 512\n"
           "  bucket_reso_steps: 64\n"
           "  caption_extension: .txt\n"
           "training:\n"
           "  seed: 1234\n"
           "  train_batch_size: 1\n"
           "  prior_loss_weight: 0.5\n" +
           (training_extra.empty() ? "  max_train_steps: 10\n" : training_extra) +
           "output:\n"
           "  output_dir: " + r + "/out\n"
           "coordinator:\n"
           "  listen_address: 127.0.0.1:0\n"
           "  metrics_address: 127.0.0.1:0\n";
  }
  static JobConfig config(const std::string& training_extra = "") {
    return parse_job_config(yaml(training_extra), "test.yaml");
  }
  // Short timeouts; the durable state goes to a file of this test's own, so tests sharing the
  // config's output_dir do not see each other's jobs.
  static CoordinatorOptions fast_options() {
    CoordinatorOptions o;
    o.service.registration_timeout = std::chrono::seconds(20);
    o.service.tick = std::chrono::milliseconds(50);
    o.service.rendezvous_timeout = std::chrono::seconds(1);
    o.service.max_restarts = 3;
    o.service_timeouts_overridden = true;
    o.state_path = state_path();
    return o;
  }
  static std::string state_path() {
    return (*root_ / "state" /
            (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
             ".sqlite"))
        .string();
  }

  static fs::path* root_;
};
fs::path* CoordinatorTest::root_ = nullptr;

std::unique_ptr<pb::Coordinator::Stub> stub_for(const std::string& address) {
  return pb::Coordinator::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

void set_deadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

grpc::Status do_register(pb::Coordinator::Stub& stub, int rank, int world_size,
                         pb::RegisterResponse* out, int deadline_s = 20) {
  pb::RegisterRequest req;
  req.set_rank(rank);
  req.set_world_size(world_size);
  req.set_hostname("testhost");
  req.set_pid(1000 + rank);
  req.set_device("cpu");
  grpc::ClientContext ctx;
  set_deadline(&ctx, deadline_s);
  return stub.Register(&ctx, req, out);
}

// Sends Finish for `rank`; returns the RPC status.
grpc::Status do_finish(pb::Coordinator::Stub& stub, int rank, int64_t global_step, bool ok,
                       const std::string& error = "", std::uint64_t generation = 0,
                       bool preempted = false) {
  pb::FinishRequest req;
  req.set_rank(rank);
  req.set_global_step(global_step);
  req.set_ok(ok);
  req.set_error(error);
  req.set_generation(generation);
  req.set_preempted(preempted);
  pb::FinishAck ack;
  grpc::ClientContext ctx;
  set_deadline(&ctx, 10);
  return stub.Finish(&ctx, req, &ack);
}

// Value of the unlabelled sample `name` in Prometheus text; NaN when absent.
double metric_value(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return std::nan("");
}

std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  std::array<char, 512> buf{};
  while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// ---- proto conversion --------------------------------------------------------------------

// An epoch plan of `batches` batches of two samples, each with a caption.
std::shared_ptr<const EpochPlan> small_plan(int epoch, int batches) {
  EpochPlan p;
  p.epoch = epoch;
  for (int b = 0; b < batches; ++b) {
    GlobalBatch g;
    g.bucket = {256, 192};
    for (int i = 0; i < 2; ++i) {
      PlanSample s;
      s.image_index = 2 * b + i;
      s.has_caption = true;
      s.caption = "sks, tag" + std::to_string(b);
      g.samples.push_back(s);
    }
    p.batches.push_back(g);
  }
  return std::make_shared<const EpochPlan>(p);
}

std::string slice_text(const grpc::Slice& s) {
  return std::string(reinterpret_cast<const char*>(s.begin()), s.size());
}

TEST(PlanBytesCache, SerializesEachPlanObjectOnce) {
  PlanBytesCache cache(2);
  std::shared_ptr<const EpochPlan> a = small_plan(0, 3);
  pb::EpochPlan message;
  to_proto(*a, &message);
  const grpc::Slice first = cache.bytes(a);
  const grpc::Slice again = cache.bytes(a);
  EXPECT_EQ(slice_text(first), message.SerializeAsString());
  EXPECT_EQ(first.begin(), again.begin());  // the same bytes, referenced
  EXPECT_EQ(cache.serializations(), 1);

  // Another object is serialized on its own, even with the same content.
  const std::shared_ptr<const EpochPlan> twin = std::make_shared<const EpochPlan>(*a);
  EXPECT_EQ(slice_text(cache.bytes(twin)), message.SerializeAsString());
  EXPECT_EQ(cache.serializations(), 2);

  // A freed plan's entry never answers for a later object (a replanned epoch, maybe at the same
  // address): its bytes are built anew.
  a.reset();
  const std::shared_ptr<const EpochPlan> replanned = small_plan(0, 5);
  pb::EpochPlan replanned_message;
  to_proto(*replanned, &replanned_message);
  EXPECT_EQ(slice_text(cache.bytes(replanned)), replanned_message.SerializeAsString());
  EXPECT_EQ(cache.serializations(), 3);

  // Capacity 2: twin and replanned are kept, a third plan evicts the least recently used.
  cache.bytes(twin);
  const std::shared_ptr<const EpochPlan> next = small_plan(1, 3);
  cache.bytes(next);
  EXPECT_EQ(cache.serializations(), 4);
  cache.bytes(twin);
  EXPECT_EQ(cache.serializations(), 4);
  cache.bytes(replanned);
  EXPECT_EQ(cache.serializations(), 5);
}

TEST(ProtoConvert, DatasetAndPlanRoundTrip) {
  Dataset d;
  ImageRecord a;
  a.index = 0;
  a.path = "/data/train/2_photo/a.png";
  a.caption = "a photo of sks";
  a.width = 600;
  a.height = 400;
  a.bucket.bucket = {320, 192};
  a.bucket.resized_width = 320;
  a.bucket.resized_height = 213;
  ImageRecord b = a;
  b.index = 1;
  b.path = "/data/reg/1_grey/b.png";
  b.is_reg = true;
  a.content_sha256 = std::string(64, 'a');
  a.has_alpha = true;
  b.dataset_index = 0;
  b.subset_index = 1;
  d.images = {a, b};
  DatasetInfo info;
  info.batch_size = 3;
  info.predefined_buckets = {{192, 320}, {256, 256}, {320, 192}};
  info.num_train_samples = 2;
  info.num_reg_samples_raw = 1;
  d.datasets = {info};
  SubsetInfo train_subset;
  train_subset.name = "2_photo";
  train_subset.config.num_repeats = 2;
  train_subset.config.flip_aug = true;
  SubsetInfo reg_subset;
  reg_subset.name = "1_grey";
  reg_subset.config.is_reg = true;
  reg_subset.config.alpha_mask = true;
  d.subsets = {train_subset, reg_subset};
  d.num_train_samples = 2;
  d.num_reg_samples_raw = 1;

  pb::DatasetManifest m;
  to_proto(d, &m);
  ASSERT_EQ(m.images_size(), 2);
  EXPECT_EQ(m.images(1).path(), "/data/reg/1_grey/b.png");
  EXPECT_TRUE(m.images(1).is_reg());
  EXPECT_EQ(m.images(0).bucket().width(), 320);
  EXPECT_EQ(m.images(0).resized_height(), 213);
  ASSERT_EQ(m.datasets_size(), 1);
  EXPECT_EQ(m.datasets(0).predefined_buckets_size(), 3);
  const Dataset back = dataset_from_proto(m);
  ASSERT_EQ(back.images.size(), 2u);
  EXPECT_EQ(back.images[0].caption, "a photo of sks");
  EXPECT_EQ(back.images[0].bucket.bucket, (BucketReso{320, 192}));
  EXPECT_EQ(back.images[1].is_reg, true);
  EXPECT_EQ(back.datasets[0].predefined_buckets, info.predefined_buckets);
  EXPECT_EQ(back.datasets[0].batch_size, 3);
  EXPECT_EQ(back.images[0].content_sha256, std::string(64, 'a'));
  EXPECT_TRUE(back.images[0].has_alpha);
  EXPECT_EQ(back.images[1].subset_index, 1);
  ASSERT_EQ(back.subsets.size(), 2u);
  EXPECT_EQ(back.subsets[0].config.num_repeats, 2);
  EXPECT_TRUE(back.subsets[0].config.flip_aug);
  EXPECT_TRUE(back.subsets[1].config.alpha_mask);
  EXPECT_TRUE(back.subsets[1].config.is_reg);
  EXPECT_EQ(back.num_train_samples, 2);
  EXPECT_EQ(back.num_reg_samples_raw, 1);
  // Whole: what comes back serialises to the same message, so no field is dropped on the way.
  pb::DatasetManifest again;
  to_proto(back, &again);
  EXPECT_EQ(again.SerializeAsString(), m.SerializeAsString());

  EpochPlan plan;
  plan.epoch = 3;
  PlanSample s0{0, 1.0f, {}, false, ""};
  PlanSample s1{1, 0.5f, {3, 5, true}, true, "b, a"};
  GlobalBatch b0;
  b0.bucket = {320, 192};
  b0.batch_size = 2;
  b0.samples = {s0, s1};
  GlobalBatch b1;
  b1.bucket = {256, 256};
  b1.batch_size = 2;
  b1.samples = {s1};
  plan.batches = {b0, b1};
  plan.reg_indices = {1, 1};
  plan.reg_cursor_begin = {4};
  plan.reg_cursor_end = {6};
  plan.reg_images_used = 1;
  pb::EpochPlan pp;
  to_proto(plan, &pp);
  EXPECT_EQ(pp.epoch(), 3);
  EXPECT_EQ(pp.batches(0).batch_size(), 2);
  EXPECT_FALSE(pp.batches(0).samples(0).has_caption());
  EXPECT_EQ(pp.batches(0).samples(0).crop_left(), -1);
  ASSERT_EQ(pp.batches_size(), 2);
  EXPECT_FLOAT_EQ(pp.batches(0).samples(1).loss_weight(), 0.5f);
  const EpochPlan plan_back = epoch_plan_from_proto(pp);
  ASSERT_EQ(plan_back.batches.size(), 2u);
  EXPECT_EQ(plan_back.batches[1].bucket, (BucketReso{256, 256}));
  EXPECT_EQ(plan_back.batches[0].samples[1].image_index, 1);
  EXPECT_EQ(plan_back.reg_indices, (std::vector<int>{1, 1}));
  EXPECT_TRUE(plan_back.batches[0].samples[1].crop_flip == (CropFlip{3, 5, true}));
  EXPECT_EQ(plan_back.batches[0].samples[1].caption, "b, a");
  EXPECT_TRUE(plan_back.batches[0].samples[1].has_caption);
  EXPECT_EQ(plan_back.batches[0].batch_size, 2);
  EXPECT_EQ(plan_back.reg_cursor_begin, (std::vector<std::int64_t>{4}));
  EXPECT_EQ(plan_back.reg_cursor_end, (std::vector<std::int64_t>{6}));
  EXPECT_EQ(plan_back.reg_images_used, 1);
  pb::EpochPlan pp_again;
  to_proto(plan_back, &pp_again);
  EXPECT_EQ(pp_again.SerializeAsString(), pp.SerializeAsString());
  EXPECT_EQ(epoch_plan_digest(plan_back), epoch_plan_digest(plan));
}

// A group's resume point crosses the wire whole: every field of its position.
TEST(ProtoConvert, ResumePointRoundTripsWhole) {
  CheckpointPosition c;
  static_cast<TrainPosition&>(c) = lf::test_support::fake_position(7, 1, 3, 2, "4:1,2:2");
  c.loss_scale = 512.0;
  c.reg_cursor = {3};
  c.dir = "/out/checkpoints/step-00000007";
  pb::ResumePoint wire;
  to_proto(c, &wire);
  EXPECT_EQ(wire.checkpoint(), c.dir);
  EXPECT_EQ(wire.position().at("lorafleet.state.plan_lineage"), "4:1,2:2");
  const CheckpointPosition back = checkpoint_position_from_proto(wire, "test");
  EXPECT_EQ(back.dir, c.dir);
  EXPECT_EQ(train_position_metadata(back), train_position_metadata(c));
  wire.mutable_position()->erase("lorafleet.state.optimizer_type");
  try {
    checkpoint_position_from_proto(wire, "RegisterResponse.resume_point");
    FAIL() << "a position without optimizer_type was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "RegisterResponse.resume_point: train state lacks 'lorafleet.state.optimizer_type'");
  }
}

// ---- job schedule ------------------------------------------------------------------------

TEST_F(CoordinatorTest, ScheduleFromMaxTrainSteps) {
  CoordinatorJob job(config());
  EXPECT_EQ(job.dataset().num_train_samples, 6);  // 3 images x 2 repeats
  EXPECT_EQ(job.dataset().num_reg_samples_raw, 3);
  EXPECT_FALSE(job.has_schedule());
  const JobSchedule s = job.set_world_size(2);
  const EpochPlan p0 = build_epoch_plan(job.dataset(), job.plan_options(2), 0);
  EXPECT_EQ(s.steps_per_epoch, static_cast<int>(p0.batches.size()));
  ASSERT_GT(s.steps_per_epoch, 0);
  EXPECT_EQ(s.max_train_steps, 10);
  EXPECT_EQ(s.num_epochs, (10 + s.steps_per_epoch - 1) / s.steps_per_epoch);
  EXPECT_EQ(job.plan_options(2).seed, 1234u);
  EXPECT_DOUBLE_EQ(job.plan_options(2).prior_loss_weight, 0.5);
  EXPECT_THROW(job.epoch_plan(s.num_epochs), std::out_of_range);
  EXPECT_THROW(job.epoch_plan(-1), std::out_of_range);
  EXPECT_THROW(job.set_world_size(0), std::invalid_argument);
}

// kohya: an epoch of B batches has ceil(B / gradient_accumulation_steps) optimizer steps.
TEST_F(CoordinatorTest, ScheduleWithGradientAccumulation) {
  CoordinatorJob job(config("  max_train_steps: 1\n  max_train_epochs: 2\n"
                            "  gradient_accumulation_steps: 4\n"));
  const JobSchedule s = job.set_world_size(1);
  const std::int64_t batches = static_cast<std::int64_t>(job.epoch_plan(0)->batches.size());
  ASSERT_EQ(s.epoch_batches, (std::vector<std::int64_t>{batches, batches}));
  EXPECT_EQ(s.gradient_accumulation_steps, 4);
  EXPECT_EQ(s.epoch_steps[0], (batches + 3) / 4);
  EXPECT_EQ(s.max_train_steps, 2 * ((batches + 3) / 4));
  // --inspect's override.
  EXPECT_EQ(job.set_world_size(1, 1).max_train_steps, 2 * batches);
}

// A plan holds every sample of its epoch: an absurd num_repeats is refused with a message,
// not a std::bad_alloc.
TEST_F(CoordinatorTest, HugeEpochIsRefusedWithAMessage) {
  const fs::path dir = *root_ / "huge" / "60000000_x";
  fs::create_directories(dir);
  fs::copy_file(*root_ / "train" / "2_photo" / "astronaut.png", dir / "a.png",
                fs::copy_options::overwrite_existing);
  std::string y = yaml();
  y.replace(y.find((*root_ / "train").string()), (*root_ / "train").string().size(),
            (*root_ / "huge").string());
  CoordinatorJob job(parse_job_config(y, "test.yaml"));
  EXPECT_EQ(job.dataset().num_train_samples, 60000000);
  try {
    job.set_world_size(1);
    FAIL() << "a 60M-sample epoch was planned";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("lower num_repeats"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(job.has_schedule());
}

TEST_F(CoordinatorTest, ScheduleFromMaxTrainEpochs) {
  CoordinatorJob job(config("  max_train_steps: 1\n  max_train_epochs: 3\n"));
  const JobSchedule s = job.set_world_size(1);
  EXPECT_EQ(s.num_epochs, 3);
  EXPECT_EQ(s.max_train_steps, 3LL * s.steps_per_epoch);
  // Cached plans equal freshly built ones, for every epoch.
  for (int e = 0; e < 3; ++e) {
    const EpochPlan fresh = build_epoch_plan(job.dataset(), job.plan_options(1), e);
    const auto cached = job.epoch_plan(e);
    ASSERT_EQ(cached->batches.size(), fresh.batches.size());
    EXPECT_EQ(cached->reg_indices, fresh.reg_indices);
  }
}

// With max_train_epochs the total is known once planned: a warmup that does not fit is refused
// then, naming the config and the key; a ratio warmup always fits.
TEST_F(CoordinatorTest, AWarmupOfTheWholePlannedRunIsRefused) {
  const std::string epochs = "  max_train_steps: 1\n  max_train_epochs: 3\n";
  const std::int64_t total = CoordinatorJob(config(epochs)).set_world_size(1).max_train_steps;
  ASSERT_GT(total, 1);
  CoordinatorJob job(config(
      epochs + "  lr_scheduler: cosine\n  lr_warmup_steps: " + std::to_string(total) + "\n"));
  try {
    job.set_world_size(1);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "test.yaml: key 'training.lr_warmup_steps': expected fewer warmup steps than the "
              "run's total of " +
                  std::to_string(total) + " steps, got " + std::to_string(total) +
                  " (nothing would train at the full lr)");
  }
  CoordinatorJob ratio(config(epochs + "  lr_scheduler: cosine\n  lr_warmup_steps: 0.5\n"));
  EXPECT_EQ(ratio.set_world_size(1).max_train_steps, total);
}

// ---- resuming on another world size ------------------------------------------------------

// 2 ranks trained 3 batches of epoch 1 (of max_train_epochs 2); the group resumes on 1 and on 3.
// The resumed epoch is the 2-rank plan continued; max_train_steps = 3 done + the rest of epoch
// 1 + epoch 2 under the new size; epoch_plan serves the continued plan.
TEST_F(CoordinatorTest, ResumeOnAnotherWorldSizeReplansTheRest) {
  CoordinatorJob job(config("  max_train_steps: 1\n  max_train_epochs: 2\n"));
  const EpochPlan w2 = build_epoch_plan(job.dataset(), job.plan_options(2), 0);
  // 6 train samples + 6 reg (kohya's rule over 3 reg images) per epoch.
  ASSERT_EQ(w2.num_samples(), 12);
  TrainPosition r;
  r.global_step = 3;
  r.epoch = 0;
  r.step_in_epoch = 3;
  r.plan_lineage = {{2, 3}};
  std::int64_t consumed_samples = 0;
  for (int k = 0; k < 3; ++k) {
    consumed_samples += static_cast<std::int64_t>(w2.batches[k].samples.size());
  }
  for (int w1 : {1, 3}) {
    SCOPED_TRACE("world_size " + std::to_string(w1));
    const JobSchedule fresh = job.set_world_size(w1);
    const JobSchedule s = job.set_resume(r);
    const EpochPlan continued = continue_epoch_plan(w2, 3, w1);
    const auto served = job.epoch_plan(0);
    EXPECT_EQ(epoch_plan_digest(*served), epoch_plan_digest(continued));
    EXPECT_EQ(served->num_samples(), 12);
    const std::int64_t rest = static_cast<std::int64_t>(continued.batches.size()) - 3;
    const std::int64_t epoch2 = static_cast<std::int64_t>(job.epoch_plan(1)->batches.size());
    EXPECT_EQ(epoch2, fresh.epoch_steps[1]);
    EXPECT_EQ(s.num_epochs, 2);
    EXPECT_EQ(s.epoch_batches[0], 3 + rest);
    EXPECT_EQ(s.max_train_steps, 3 + rest + epoch2);
    EXPECT_EQ(s.max_train_steps, w1 == 1 ? 21 : 11);  // 3 + 6 + 12; 3 + 3 + 5
    if (w1 == 1) {
      // One sample per batch: every remaining sample is a step.
      EXPECT_EQ(rest, 12 - consumed_samples);
      EXPECT_EQ(s.max_train_steps, 3 + (12 - consumed_samples) + 12);
    }
    // A plain set_world_size undoes the resume.
    EXPECT_EQ(job.set_world_size(w1).max_train_steps, fresh.max_train_steps);
    EXPECT_EQ(epoch_plan_digest(*job.epoch_plan(0)),
              epoch_plan_digest(build_epoch_plan(job.dataset(), job.plan_options(w1), 0)));
  }
  // The same world size without a change of size is exactly the fresh schedule and plans.
  const JobSchedule fresh2 = job.set_world_size(2);
  const JobSchedule same = job.set_resume(r);
  EXPECT_EQ(same.max_train_steps, fresh2.max_train_steps);
  EXPECT_EQ(same.max_train_steps, 12);  // 2 x 6 batches
  EXPECT_EQ(same.epoch_steps, fresh2.epoch_steps);
  EXPECT_EQ(epoch_plan_digest(*job.epoch_plan(0)), epoch_plan_digest(w2));
  // A lineage that does not add up is refused.
  r.plan_lineage = {{2, 2}};
  EXPECT_THROW(job.set_resume(r), std::invalid_argument);
}

// max_train_steps given: kept, and the epochs are counted to cover it from the resume point.
TEST_F(CoordinatorTest, ResumeKeepsMaxTrainSteps) {
  CoordinatorJob job(config("  max_train_steps: 20\n"));
  job.set_world_size(3);
  TrainPosition r;
  r.global_step = 2;
  r.step_in_epoch = 2;
  r.plan_lineage = {{1, 2}};
  const JobSchedule s = job.set_resume(r);
  EXPECT_EQ(s.max_train_steps, 20);
  const std::int64_t rest =
      static_cast<std::int64_t>(job.epoch_plan(0)->batches.size()) - 2;  // W=3 after 2 singles
  std::int64_t covered = 2 + rest;
  int epochs = 1;
  while (covered < 20) covered += s.epoch_steps.at(epochs++);
  EXPECT_EQ(s.num_epochs, epochs);
  // 10 samples left in 3-sample batches of one bucket each (2 buckets): 4 batches; then epochs of
  // 5 steps on 3 ranks: 2 + 4 + 5 + 5 + 5 >= 20 in 4 epochs.
  EXPECT_EQ(rest, 4);
  EXPECT_EQ(s.num_epochs, 4);
}

using lf::test_support::fake_position;
using lf::test_support::write_fake_checkpoint;

TEST_F(CoordinatorTest, ResumeRequestResolution) {
  const fs::path out = *root_ / "resume_out";
  fs::remove_all(out);
  EXPECT_FALSE(resolve_resume_request("", out.string()).has_value());
  EXPECT_FALSE(resolve_resume_request("auto", out.string()).has_value());  // nothing yet
  write_fake_checkpoint(out / "checkpoints/step-00000003", fake_position(3, 0, 3, 2, "2:3"));
  write_fake_checkpoint(out / "checkpoints/step-00000005", fake_position(5, 0, 5, 1, "2:3,1:2"));
  fs::create_directories(out / "checkpoints/.step-00000007.tmp");  // torn: skipped
  // Torn: a newer checkpoint whose commit marker was never written (killed mid-save).
  write_fake_checkpoint(out / "checkpoints/step-00000009", fake_position(9, 0, 9, 1, "1:9"));
  fs::remove(out / "checkpoints/step-00000009/COMMITTED");
  // Torn: committed, then its LoRA file truncated (a disk or copy fault).
  write_fake_checkpoint(out / "checkpoints/step-00000008", fake_position(8, 0, 8, 1, "1:8"));
  fs::resize_file(out / "checkpoints/step-00000008/lora.safetensors",
                  fs::file_size(out / "checkpoints/step-00000008/lora.safetensors") - 2);
  auto latest = resolve_resume_request("auto", out.string());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->dir, (out / "checkpoints/step-00000005").string());
  EXPECT_EQ(latest->global_step, 5);
  EXPECT_EQ(latest->step_in_epoch, 5);
  EXPECT_EQ(latest->samples_in_epoch, 7);
  EXPECT_EQ(latest->world_size, 1);
  EXPECT_EQ(latest->shared_seed, 1234u);
  EXPECT_EQ(latest->plan_digest, "abc");
  EXPECT_EQ(latest->plan_lineage, (std::vector<PlanSegment>{{2, 3}, {1, 2}}));
  EXPECT_EQ(resolve_resume_request(out.string(), "")->global_step, 5);
  EXPECT_EQ(resolve_resume_request((out / "checkpoints/step-00000003").string(), "")->global_step,
            3);
  // Pointing at the torn checkpoint itself is an error naming it.
  try {
    resolve_resume_request((out / "checkpoints/step-00000009").string(), "");
    ADD_FAILURE() << "a torn checkpoint was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("step-00000009"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("COMMITTED"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resolve_resume_request((out / "missing").string(), ""), std::runtime_error);
  fs::create_directories(out / "empty");
  EXPECT_THROW(resolve_resume_request((out / "empty").string(), ""), std::runtime_error);
}

// Forms a generation of `world_size` ranks that all send `--resume resume` and the
// supervisor's `restart_count`; returns rank 0's answer.
pb::RegisterResponse form_resumed_generation(const std::string& address, int world_size,
                                             const std::string& resume, int restart_count) {
  std::vector<pb::RegisterResponse> resp(world_size);
  std::vector<grpc::Status> st(world_size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world_size; ++r) {
    ranks.emplace_back([&, r] {
      auto stub = stub_for(address);
      pb::RegisterRequest req;
      req.set_rank(r);
      req.set_world_size(world_size);
      req.mutable_resume_point()->set_checkpoint(resume);
      req.set_restart_count(restart_count);
      grpc::ClientContext ctx;
      set_deadline(&ctx, 20);
      st[r] = stub->Register(&ctx, req, &resp[r]);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world_size; ++r) EXPECT_TRUE(st[r].ok()) << st[r].error_message();
  return resp[0];
}

// An explicit --resume of an older checkpoint moves the newer checkpoints of the branch it
// abandons to checkpoints/abandoned-<time>/, never deleting them, so --resume auto cannot pick
// them. The same --resume repeated by a supervisor's restart (restart_count > 0) continues from
// the newest committed checkpoint instead of going back.
TEST_F(CoordinatorTest, ExplicitResumeOfAnOlderCheckpointSetsTheNewerOnesAside) {
  const fs::path ckpts = *root_ / "out" / "checkpoints";
  fs::remove_all(ckpts);
  // Positions the job accepts: its seed and options, and its own plan of epoch 1 as trained.
  CoordinatorJob job(config(), /*check_model_files=*/false);
  auto meta = [&](int step) {
    TrainPosition p = fake_position(step, 0, step, 2, "2:" + std::to_string(step));
    p.plan_digest = epoch_plan_digest(
        build_continued_epoch_plan(job.dataset(), job.plan_options(2), 0, {{2, step}}));
    return p;
  };
  for (int step : {2, 4, 5}) write_fake_checkpoint(ckpts / checkpoint_dir_name(step), meta(step));
  const std::string step2 = (ckpts / "step-00000002").string();
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  o.state_path = "";  // each server a new job record
  {
    CoordinatorServer server(config(), o);
    server.start();
    // A supervisor's restart of a group first started with --resume step-2: the newest.
    const pb::RegisterResponse r = form_resumed_generation(server.address(), 2, step2, 1);
    EXPECT_EQ(r.resume_point().position().at("lorafleet.state.global_step"), "5");
    EXPECT_TRUE(fs::exists(ckpts / "step-00000005"));
    server.shutdown();
  }
  {
    CoordinatorServer server(config(), o);
    server.start();
    const pb::RegisterResponse r = form_resumed_generation(server.address(), 2, step2, 0);
    EXPECT_EQ(r.resume_point().position().at("lorafleet.state.global_step"), "2");
    EXPECT_EQ(r.resume_point().checkpoint(), step2);
    server.shutdown();
  }
  std::vector<std::string> left, aside;
  fs::path folder;
  for (const auto& e : fs::directory_iterator(ckpts)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("abandoned-", 0) == 0) folder = e.path();
    left.push_back(name);
  }
  ASSERT_FALSE(folder.empty()) << "no abandoned-<time> folder";
  EXPECT_EQ(folder.filename().string().size(), std::string("abandoned-YYYYmmddHHMMSS").size());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{folder.filename().string(), "step-00000002"}));
  for (const auto& e : fs::directory_iterator(folder)) aside.push_back(e.path().filename());
  std::sort(aside.begin(), aside.end());
  EXPECT_EQ(aside, (std::vector<std::string>{"step-00000004", "step-00000005"}));
  // Moved whole, still complete; --resume auto now finds the resumed one.
  EXPECT_FALSE(checkpoint_torn_reason((folder / "step-00000005").string()).has_value());
  EXPECT_EQ(resolve_resume_request("auto", (*root_ / "out").string())->global_step, 2);
  fs::remove_all(ckpts);
}

// The ranks of a group must ask for the same resume point; the job cannot start otherwise.
TEST_F(CoordinatorTest, RanksAskingDifferentResumePointsAreRefused) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  grpc::Status st[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto stub = stub_for(server.address());
      pb::RegisterRequest req;
      req.set_rank(r);
      req.set_world_size(2);
      if (r == 1) req.mutable_resume_point()->set_checkpoint("auto");
      pb::RegisterResponse resp;
      grpc::ClientContext ctx;
      set_deadline(&ctx, 20);
      st[r] = stub->Register(&ctx, req, &resp);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st[r].error_message().find("ranks 0: no --resume; ranks 1: --resume auto"),
              std::string::npos)
        << st[r].error_message();
  }
  // Bad input: a restarted group would be refused the same way (exit 3, not retried).
  EXPECT_EQ(server.service().wait_until_done_for(std::chrono::seconds(5)), std::optional<int>(3));
}

// ---- the service end to end --------------------------------------------------------------

TEST_F(CoordinatorTest, TwoRanksFullLifecycle) {
  const JobConfig cfg = config();
  CoordinatorServer server(cfg, fast_options());
  server.start();
  ASSERT_GT(server.port(), 0);
  ASSERT_GT(server.metrics_port(), 0);
  const std::string address = server.address();
  EXPECT_EQ(address, "127.0.0.1:" + std::to_string(server.port()));
  auto stub = stub_for(address);

  // Plans are refused until every rank has registered.
  {
    pb::GetEpochPlanRequest req;
    req.set_epoch(0);
    pb::EpochPlan plan;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    EXPECT_EQ(stub->GetEpochPlan(&ctx, req, &plan).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
  }

  pb::RegisterResponse resp[2];
  grpc::Status st[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto s = stub_for(address);
      st[r] = do_register(*s, r, 2, &resp[r]);
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(st[0].ok()) << st[0].error_message();
  ASSERT_TRUE(st[1].ok()) << st[1].error_message();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(resp[r].rank(), r);
    EXPECT_EQ(resp[r].world_size(), 2);
    EXPECT_EQ(resp[r].shared_seed(), 1234u);
    EXPECT_EQ(resp[r].job_config_yaml(), cfg.yaml_text);
    EXPECT_EQ(resp[r].job_config_name(), "test.yaml");
    EXPECT_EQ(resp[r].base_dir(), fs::current_path().string());
    EXPECT_EQ(resp[r].max_train_steps(), 10);
    EXPECT_EQ(resp[r].generation(), 1u);
  }
  const JobSchedule sched = server.job().schedule();
  EXPECT_EQ(resp[0].num_epochs(), sched.num_epochs);

  // A third worker with another world_size is refused, naming both values.
  {
    pb::RegisterResponse r;
    const grpc::Status s = do_register(*stub, 1, 3, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(s.error_message().find("world_size 3"), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("world_size is 2"), std::string::npos) << s.error_message();
  }

  // Dataset manifest.
  {
    pb::DatasetManifest m;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    ASSERT_TRUE(stub->GetDataset(&ctx, pb::GetDatasetRequest(), &m).ok());
    EXPECT_EQ(m.images_size(), 6);
    EXPECT_EQ(m.num_train_samples(), 6);
    EXPECT_EQ(m.num_reg_samples_raw(), 3);
    int reg = 0;
    for (const auto& e : m.images()) reg += e.is_reg() ? 1 : 0;
    EXPECT_EQ(reg, 3);
    EXPECT_EQ(m.images(0).caption(), "a photo of sks astronaut");
    ASSERT_EQ(m.datasets_size(), 1);
    EXPECT_GT(m.datasets(0).predefined_buckets_size(), 0);
  }

  // Epoch 0 equals the plan computed locally.
  {
    pb::GetEpochPlanRequest req;
    req.set_epoch(0);
    pb::EpochPlan plan;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    ASSERT_TRUE(stub->GetEpochPlan(&ctx, req, &plan).ok());
    const EpochPlan local =
        build_epoch_plan(server.job().dataset(), server.job().plan_options(2), 0);
    EXPECT_EQ(plan.epoch(), 0);
    EXPECT_EQ(plan.batches(0).batch_size(), 1);
    ASSERT_EQ(plan.batches_size(), static_cast<int>(local.batches.size()));
    for (int b = 0; b < plan.batches_size(); ++b) {
      EXPECT_EQ(plan.batches(b).bucket().width(), local.batches[b].bucket.width);
      EXPECT_EQ(plan.batches(b).bucket().height(), local.batches[b].bucket.height);
      ASSERT_EQ(plan.batches(b).samples_size(), static_cast<int>(local.batches[b].samples.size()));
      for (int i = 0; i < plan.batches(b).samples_size(); ++i) {
        EXPECT_EQ(plan.batches(b).samples(i).image_index(),
                  local.batches[b].samples[i].image_index);
        EXPECT_FLOAT_EQ(plan.batches(b).samples(i).loss_weight(),
                        local.batches[b].samples[i].loss_weight);
      }
    }
    EXPECT_EQ(std::vector<int>(plan.reg_indices().begin(), plan.reg_indices().end()),
              local.reg_indices);
  }
  // Epochs outside [0, num_epochs) are invalid.
  for (int bad : {-1, sched.num_epochs}) {
    pb::GetEpochPlanRequest req;
    req.set_epoch(bad);
    pb::EpochPlan plan;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    EXPECT_EQ(stub->GetEpochPlan(&ctx, req, &plan).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT)
        << "epoch " << bad;
  }

  // Progress from both ranks shows up on /metrics.
  for (int r = 0; r < 2; ++r) {
    pb::ProgressReport rep;
    rep.set_rank(r);
    rep.set_global_step(7);
    rep.set_epoch(1);
    rep.set_loss(0.125);
    rep.set_learning_rate(1e-4);
    rep.set_samples(14);
    rep.set_samples_per_second(2.5 + r);
    rep.mutable_timings()->set_step_seconds(0.4);
    pb::ProgressAck ack;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    ASSERT_TRUE(stub->ReportProgress(&ctx, rep, &ack).ok());
    EXPECT_FALSE(ack.stop());
  }
  httplib::Client http("127.0.0.1", server.metrics_port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << "GET /metrics failed";
  ASSERT_EQ(res->status, 200);
  const std::string body = res->body;
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_global_step"), 7.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_epoch"), 1.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_loss"), 0.125);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_samples_per_second"), 6.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_samples_total"), 28.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_workers_registered"), 2.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_workers_alive"), 2.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_world_size"), 2.0);
  EXPECT_DOUBLE_EQ(metric_value(body, "lorafleet_job_max_train_steps"), 10.0);
  EXPECT_NE(body.find("lorafleet_rank_global_step{rank=\"1\"} 7"), std::string::npos) << body;
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    const fs::path file = *root_ / "metrics.txt";
    std::ofstream(file) << body;
    const auto [rc, out] = run_command("promtool check metrics < " + file.string());
    EXPECT_EQ(rc, 0) << out << "\n" << body;
  }

  // Checkpoint: committed once both ranks reported the step.
  auto commit = [&](int rank, std::int64_t step) {
    pb::CheckpointReport rep;
    rep.set_rank(rank);
    rep.set_global_step(step);
    rep.set_path("/out/lora-step" + std::to_string(step) + ".safetensors");
    pb::CheckpointAck ack;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    EXPECT_TRUE(stub->CommitCheckpoint(&ctx, rep, &ack).ok());
    return ack.committed();
  };
  EXPECT_FALSE(commit(1, 5));
  EXPECT_EQ(server.service().last_committed_step(), -1);
  EXPECT_TRUE(commit(0, 5));
  EXPECT_TRUE(commit(1, 5));  // a retry after the commit
  EXPECT_EQ(server.service().last_committed_step(), 5);
  EXPECT_DOUBLE_EQ(metric_value(server.metrics().serialize(),
                                "lorafleet_checkpoints_committed_total"),
                   1.0);

  // Finish from both ranks ends the job with exit code 0.
  EXPECT_FALSE(server.wait_for(std::chrono::milliseconds(10)).has_value());
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(do_finish(*stub, r, 10, true).ok());
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);

  const std::string snapshot = server.write_metrics_snapshot();
  EXPECT_EQ(snapshot, (*root_ / "out/metrics/coordinator.prom").string());
  std::ifstream in(snapshot);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_DOUBLE_EQ(metric_value(text.str(), "lorafleet_workers_alive"), 0.0);
  EXPECT_DOUBLE_EQ(metric_value(text.str(), "lorafleet_workers_finished"), 2.0);
  server.shutdown();
}

// gRPC serves GetDataset and GetEpochPlan through CoordinatorEndpoint: the bytes of the
// message the service would convert, a plan serialized once however many ranks ask, and the
// service's errors as they are.
TEST_F(CoordinatorTest, EndpointServesEachPlanSerializedOnce) {
  CoordinatorOptions o = fast_options();
  o.world_size = 2;
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  std::vector<std::thread> ranks;
  grpc::Status st[2];
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      pb::RegisterResponse resp;
      st[r] = do_register(*stub_for(address), r, 2, &resp);
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(st[0].ok() && st[1].ok()) << st[0].error_message() << st[1].error_message();
  auto stub = stub_for(address);
  auto plan_text = [&](int epoch, int world_size, grpc::StatusCode expected) {
    pb::GetEpochPlanRequest req;
    req.set_epoch(epoch);
    req.set_world_size(world_size);
    pb::EpochPlan plan;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    EXPECT_EQ(stub->GetEpochPlan(&ctx, req, &plan).error_code(), expected) << "epoch " << epoch;
    return plan.SerializeAsString();
  };
  const CoordinatorJob& job = server.job();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(plan_text(0, 0, grpc::StatusCode::OK),
              slice_text(epoch_plan_bytes(*job.epoch_plan(0))));
  }
  EXPECT_EQ(server.endpoint().plan_serializations(), 1);
  EXPECT_EQ(plan_text(1, 0, grpc::StatusCode::OK),
            slice_text(epoch_plan_bytes(*job.epoch_plan(1))));
  EXPECT_EQ(server.endpoint().plan_serializations(), 2);
  // The full plan of another world size (a resume's check) is built for its call.
  EXPECT_EQ(plan_text(0, 3, grpc::StatusCode::OK),
            slice_text(epoch_plan_bytes(job.full_epoch_plan(0, 3))));
  EXPECT_EQ(server.endpoint().plan_serializations(), 3);
  plan_text(job.schedule().num_epochs, 0, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(server.endpoint().plan_serializations(), 3);

  pb::DatasetManifest manifest;
  grpc::ClientContext ctx;
  set_deadline(&ctx, 10);
  ASSERT_TRUE(stub->GetDataset(&ctx, pb::GetDatasetRequest(), &manifest).ok());
  pb::DatasetManifest local;
  to_proto(job.dataset(), &local);
  EXPECT_EQ(manifest.SerializeAsString(), local.SerializeAsString());
  EXPECT_EQ(manifest.images_size(), 6);
  server.shutdown();
}

TEST_F(CoordinatorTest, FailedRankMakesExitCodeOneAndAsksOthersToStop) {
  CoordinatorOptions o = fast_options();
  o.world_size = 2;  // fixed up front
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  EXPECT_EQ(server.metrics_port(), 0);
  auto stub = stub_for(server.address());
  {
    pb::RegisterResponse r;  // a mismatch is refused even before anyone registered
    EXPECT_EQ(do_register(*stub, 0, 3, &r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(do_register(*stub, 2, 2, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  std::thread other([&] {
    pb::RegisterResponse r;
    auto s = stub_for(server.address());
    EXPECT_TRUE(do_register(*s, 1, 2, &r).ok());
  });
  pb::RegisterResponse r0;
  ASSERT_TRUE(do_register(*stub, 0, 2, &r0).ok());
  other.join();

  ASSERT_TRUE(do_finish(*stub, 1, 3, false, "CUDA out of memory", 1).ok());
  EXPECT_FALSE(server.service().generation_running());
  {
    pb::ProgressReport rep;
    rep.set_rank(0);
    rep.set_global_step(4);
    pb::ProgressAck ack;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    ASSERT_TRUE(stub->ReportProgress(&ctx, rep, &ack).ok());
    EXPECT_TRUE(ack.stop());
    EXPECT_NE(ack.stop_reason().find("generation 1 ended"), std::string::npos) << ack.stop_reason();
  }
  // The failure ends the generation, not the job: the rest of it may still finish.
  EXPECT_FALSE(server.wait_for(std::chrono::milliseconds(10)).has_value());
  ASSERT_TRUE(do_finish(*stub, 0, 4, true, "", 1).ok());
  // No generation 2 registers within the rendezvous timeout (1 s): the job fails.
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(server.service().end_reason().find("missing ranks 0, 1"), std::string::npos)
      << server.service().end_reason();
}

// A rank that stops on bad input (exit 3) before every rank registered ends the job at once:
// the others, blocked in Register, would otherwise wait for a group that can never form.
TEST_F(CoordinatorTest, BadInputBeforeTheGroupFormsEndsTheJobAtOnce) {
  CoordinatorOptions o = fast_options();
  o.world_size = 2;
  o.metrics_address = "";
  o.service.rendezvous_timeout = std::chrono::seconds(60);
  CoordinatorServer server(config(), o);
  server.start();
  std::thread waiting([&] {
    pb::RegisterResponse r;
    auto s = stub_for(server.address());
    EXPECT_FALSE(do_register(*s, 0, 2, &r).ok());  // released when the job ends
  });
  auto stub = stub_for(server.address());
  pb::FinishRequest req;
  req.set_rank(1);
  req.set_ok(false);
  req.set_permanent(true);
  req.set_error("dataset.max_image_pixels: /d/big.png has 182000000 pixels");
  pb::FinishAck ack;
  grpc::ClientContext ctx;
  set_deadline(&ctx, 10);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(stub->Finish(&ctx, req, &ack).ok());
  EXPECT_EQ(server.wait_for(std::chrono::seconds(5)), std::optional<int>(3));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(server.service().end_reason(),
            "rank 1 stopped on bad input before its group formed (exit 3; a restart would fail "
            "the same way): dataset.max_image_pixels: /d/big.png has 182000000 pixels");
  server.shutdown();
  waiting.join();
}

TEST_F(CoordinatorTest, RegistrationTimesOutAndWithdrawsTheRank) {
  CoordinatorOptions o = fast_options();
  o.service.registration_timeout = std::chrono::milliseconds(300);
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  auto stub = stub_for(server.address());
  pb::RegisterResponse r;
  const grpc::Status s = do_register(*stub, 0, 2, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(s.error_message().find("missing ranks: 1"), std::string::npos) << s.error_message();
  EXPECT_EQ(server.service().registered_count(), 0);
  // world_size was withdrawn too: a retry with another world_size is accepted.
  EXPECT_TRUE(do_register(*stub, 0, 1, &r).ok());
  EXPECT_EQ(r.world_size(), 1);
}

// Found by the coordinator_handlers fuzz target (regressions/coordinator_handlers/
// register_world_size_1507321): a Register with world_size 1507321 was accepted, so the
// coordinator planned the job for 1.5 million ranks and allocated their state (11 s under ASan;
// 2^31 - 1 would exhaust memory), and its timeout listed 1507320 missing ranks in one line.
TEST_F(CoordinatorTest, RegisterRefusesAWorldSizePastTheMaximum) {
  CoordinatorOptions o = fast_options();
  o.service.registration_timeout = std::chrono::milliseconds(300);
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  auto stub = stub_for(server.address());
  pb::RegisterResponse r;
  const auto t0 = std::chrono::steady_clock::now();
  grpc::Status s = do_register(*stub, 0, 2147483647, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "Register from rank 0: world_size must be <= 65536, got 2147483647");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // The largest one is planned; its timeout names the first 16 missing ranks and their count.
  s = do_register(*stub, 0, kMaxWorldSize, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_NE(s.error_message().find("0 of the 65535 other ranks registered (missing ranks: 1, 2, "
                                   "3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, ... (65535 "
                                   "in total))"),
            std::string::npos)
      << s.error_message().substr(0, 400);
  EXPECT_TRUE(do_register(*stub, 0, 1, &r).ok());
}

TEST_F(CoordinatorTest, SilentRankIsPresumedDeadAndEndsTheJob) {
  CoordinatorOptions o = fast_options();
  o.service.worker_timeout = std::chrono::milliseconds(600);
  o.service_timeouts_overridden = true;
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  auto stub = stub_for(server.address());
  pb::RegisterResponse r;
  ASSERT_TRUE(do_register(*stub, 0, 1, &r).ok());
  // A heartbeat (a repeated progress report) keeps the rank alive past the timeout...
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    pb::ProgressReport rep;
    rep.set_rank(0);
    pb::ProgressAck ack;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 5);
    ASSERT_TRUE(stub->ReportProgress(&ctx, rep, &ack).ok());
  }
  EXPECT_FALSE(server.wait_for(std::chrono::milliseconds(10)).has_value());
  // ...and silence beyond it ends the job with exit code 1 instead of waiting forever.
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
}

TEST_F(CoordinatorTest, ShutdownReleasesBlockedRegister) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  auto server = std::make_unique<CoordinatorServer>(config(), o);
  server->start();
  const std::string address = server->address();
  grpc::Status s;
  std::thread waiting([&] {
    auto stub = stub_for(address);
    pb::RegisterResponse r;
    s = do_register(*stub, 0, 2, &r);
  });
  while (server->service().registered_count() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  {
    auto stub = stub_for(address);
    pb::RegisterResponse r;
    EXPECT_EQ(do_register(*stub, 0, 2, &r).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  }
  const auto t0 = std::chrono::steady_clock::now();
  server->shutdown();
  waiting.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(CoordinatorTest, BindFailureNamesTheAddress) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  CoordinatorServer first(config(), o);
  first.start();
  o.listen_address = first.address();
  CoordinatorServer second(config(), o);
  try {
    second.start();
    FAIL() << "second server bound " << first.address() << " too";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(first.address()), std::string::npos) << e.what();
  }
}

// A free TCP port on 127.0.0.1 (bound and released; fine for a test).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  return ok ? ntohs(addr.sin_port) : 0;
}

TEST_F(CoordinatorTest, RunCoordinatorEndsWhenTheOnlyRankFinishes) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const JobConfig cfg = config();
  CoordinatorOptions o = fast_options();
  o.listen_address = "127.0.0.1:" + std::to_string(port);
  o.metrics_address = "127.0.0.1:0";
  o.world_size = 1;
  o.linger_seconds = 0;
  const fs::path snapshot = *root_ / "out/metrics/coordinator.prom";
  std::error_code ec;
  fs::remove(snapshot, ec);
  int rc = -1;
  std::thread coordinator([&] { rc = run_coordinator(cfg, o); });

  auto stub = stub_for(*o.listen_address);
  pb::RegisterRequest req;
  req.set_rank(0);
  req.set_world_size(1);
  pb::RegisterResponse resp;
  {
    grpc::ClientContext ctx;
    set_deadline(&ctx, 20);
    ctx.set_wait_for_ready(true);  // the server may still be scanning the dataset
    ASSERT_TRUE(stub->Register(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(resp.max_train_steps(), 10);
  {
    pb::ProgressReport rep;
    rep.set_rank(0);
    rep.set_global_step(10);
    pb::ProgressAck ack;
    grpc::ClientContext ctx;
    set_deadline(&ctx, 10);
    ASSERT_TRUE(stub->ReportProgress(&ctx, rep, &ack).ok());
  }
  ASSERT_TRUE(do_finish(*stub, 0, 10, true).ok());
  coordinator.join();
  EXPECT_EQ(rc, 0);
  std::ifstream in(snapshot);
  ASSERT_TRUE(in.good()) << snapshot;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_DOUBLE_EQ(metric_value(text.str(), "lorafleet_global_step"), 10.0);
  EXPECT_DOUBLE_EQ(metric_value(text.str(), "lorafleet_workers_finished"), 1.0);
}

// ---- generations, restarts and durable state -----------------------------------------------

grpc::Status do_progress(pb::Coordinator::Stub& stub, int rank, std::uint64_t generation,
                         std::int64_t step, pb::ProgressAck* ack) {
  pb::ProgressReport rep;
  rep.set_rank(rank);
  rep.set_generation(generation);
  rep.set_global_step(step);
  rep.set_samples(2 * step);
  grpc::ClientContext ctx;
  set_deadline(&ctx, 10);
  return stub.ReportProgress(&ctx, rep, ack);
}

grpc::Status do_commit(pb::Coordinator::Stub& stub, int rank, std::uint64_t generation,
                       std::int64_t step, bool* committed = nullptr) {
  pb::CheckpointReport rep;
  rep.set_rank(rank);
  rep.set_generation(generation);
  rep.set_global_step(step);
  rep.set_path("/out/checkpoints/step-" + std::to_string(step));
  pb::CheckpointAck ack;
  grpc::ClientContext ctx;
  set_deadline(&ctx, 10);
  const grpc::Status st = stub.CommitCheckpoint(&ctx, rep, &ack);
  if (committed != nullptr) *committed = ack.committed();
  return st;
}

grpc::Status register_with_cause(const std::string& address, int rank, int world_size,
                                 const std::string& cause, pb::RegisterResponse* out,
                                 int max_restarts = -1) {
  auto stub = stub_for(address);
  pb::RegisterRequest req;
  req.set_rank(rank);
  req.set_world_size(world_size);
  req.set_hostname("testhost");
  req.set_pid(2000 + rank);
  req.set_restart_cause(cause);
  if (max_restarts >= 0) req.set_max_restarts(max_restarts);  // lorafleet-launch's budget
  grpc::ClientContext ctx;
  set_deadline(&ctx, 20);
  return stub->Register(&ctx, req, out);
}

// Registers ranks 0..world_size-1 concurrently (each with restart `cause`); all must succeed.
void form_generation(const std::string& address, int world_size, const std::string& cause = "",
                     std::uint64_t expected_generation = 0, int max_restarts = -1) {
  std::vector<pb::RegisterResponse> resp(world_size);
  std::vector<grpc::Status> st(world_size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world_size; ++r) {
    ranks.emplace_back([&, r] {
      st[r] = register_with_cause(address, r, world_size, cause, &resp[r], max_restarts);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < world_size; ++r) {
    ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].error_message();
    if (expected_generation > 0) {
      EXPECT_EQ(resp[r].generation(), expected_generation);
    }
  }
}

// Value of `name{label="value"}` in Prometheus text; NaN when absent.
double labelled_value(const std::string& text, const std::string& name, const std::string& label,
                      const std::string& value) {
  return metric_value(text, name + "{" + label + "=\"" + value + "\"}");
}

void wait_until(const std::function<bool()>& cond) {
  for (int i = 0; i < 500 && !cond(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(cond());
}

TEST_F(CoordinatorTest, ReRegisterStartsTheNextGenerationAndStopsTheOldOne) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  auto stub = stub_for(address);
  form_generation(address, 2, "", 1);
  ASSERT_EQ(server.service().generation(), 1u);

  // Rank 1's supervisor restarted it: its Register ends generation 1 and waits for rank 0.
  grpc::Status rank1_status;
  pb::RegisterResponse rank1_resp;
  std::thread rank1([&] { rank1_status = register_with_cause(address, 1, 2, "", &rank1_resp); });
  wait_until([&] {
    return !server.service().generation_running() && server.service().registered_count() == 1;
  });
  // The old rank 0 (generation 1) is told to stop, and its commits are refused.
  pb::ProgressAck ack;
  ASSERT_TRUE(do_progress(*stub, 0, 1, 3, &ack).ok());
  EXPECT_TRUE(ack.stop());
  EXPECT_NE(ack.stop_reason().find("generation 1 was superseded by 2"), std::string::npos)
      << ack.stop_reason();
  const grpc::Status commit = do_commit(*stub, 0, 1, 4);
  EXPECT_EQ(commit.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(commit.error_message().find("generation 1 was superseded by 2"), std::string::npos)
      << commit.error_message();
  // A second Register of rank 1 while the first waits in the barrier is a conflict.
  {
    pb::RegisterResponse r;
    EXPECT_EQ(register_with_cause(address, 1, 2, "", &r).error_code(),
              grpc::StatusCode::ALREADY_EXISTS);
  }

  // Rank 0 restarts too: generation 2 forms, one restart counted as rank_restarted.
  pb::RegisterResponse rank0_resp;
  ASSERT_TRUE(register_with_cause(address, 0, 2, "", &rank0_resp).ok());
  rank1.join();
  ASSERT_TRUE(rank1_status.ok()) << rank1_status.error_message();
  EXPECT_EQ(rank0_resp.generation(), 2u);
  EXPECT_EQ(rank1_resp.generation(), 2u);
  EXPECT_EQ(rank1_resp.rank(), 1);
  EXPECT_EQ(server.service().restarts("rank_restarted"), 1);
  const std::string text = server.metrics().serialize();
  EXPECT_DOUBLE_EQ(labelled_value(text, "lorafleet_restarts_total", "cause", "rank_restarted"), 1);
  EXPECT_DOUBLE_EQ(labelled_value(text, "lorafleet_restarts_total", "cause", "worker_failed"), 0);
  EXPECT_DOUBLE_EQ(metric_value(text, "lorafleet_generation"), 2.0);
  EXPECT_DOUBLE_EQ(labelled_value(text, "lorafleet_coordinator_rpcs_total", "method", "Register"),
                   5.0);  // 2 + 1 + the refused one + 1
  EXPECT_DOUBLE_EQ(
      labelled_value(text, "lorafleet_coordinator_rpcs_total", "method", "CommitCheckpoint"), 1.0);

  // Generation 2 trains and finishes: the job is done.
  ASSERT_TRUE(do_progress(*stub, 0, 2, 1, &ack).ok());
  EXPECT_FALSE(ack.stop());
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(do_finish(*stub, r, 10, true, "", 2).ok());
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
}

// Found by the chaos run (seed 1): a coordinator restarted while rank 0 waited for the next
// epoch's plan came back after the peers had timed out in their allreduce and ended the
// generation; its GetEpochPlan was refused with FAILED_PRECONDITION, which a worker takes as
// bad input (exit 3, not retried), where its group only needs to restart (exit 75).
TEST_F(CoordinatorTest, APlanAskedForAfterTheGenerationEndedIsAborted) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  auto stub = stub_for(address);
  form_generation(address, 2, "", 1);
  ASSERT_TRUE(do_finish(*stub, 1, 3, false, "gloo: allreduce timed out", 1).ok());
  ASSERT_FALSE(server.service().generation_running());
  pb::GetEpochPlanRequest req;
  req.set_epoch(1);
  pb::EpochPlan plan;
  grpc::ClientContext ctx;
  set_deadline(&ctx, 10);
  const grpc::Status st = stub->GetEpochPlan(&ctx, req, &plan);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(st.error_message(),
            "GetEpochPlan(1): generation 1 ended; the group must register again");
}

TEST_F(CoordinatorTest, MaxRestartsExhaustedFailsTheJob) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  o.service.max_restarts = 1;
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  auto stub = stub_for(address);
  form_generation(address, 2, "", 1);
  // Rank 0 failed; the group comes back (restart 1 of 1).
  ASSERT_TRUE(do_finish(*stub, 0, 3, false, "NaN loss", 1).ok());
  form_generation(address, 2, "worker_failed", 2);
  EXPECT_EQ(server.service().restarts("worker_failed"), 1);
  // It fails again: the next Register is refused and the job fails.
  ASSERT_TRUE(do_finish(*stub, 1, 5, false, "NaN loss", 2).ok());
  pb::RegisterResponse r;
  const grpc::Status st = register_with_cause(address, 0, 2, "worker_failed", &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("cluster.max_restarts (1) exhausted"), std::string::npos)
      << st.error_message();
  EXPECT_NE(st.error_message().find("; raise cluster.max_restarts in the job config to allow more"),
            std::string::npos)
      << st.error_message();
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
}

// One restart budget: a group whose supervisor was given --max-restarts (RegisterRequest
// max_restarts) restarts that many times, past cluster.max_restarts, and the refusal names the
// budget that ended the job and how to raise it.
TEST_F(CoordinatorTest, TheLaunchersMaxRestartsIsTheJobsBudget) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  o.service.max_restarts = 1;
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  auto stub = stub_for(address);
  form_generation(address, 2, "", 1, 2);
  for (std::uint64_t g = 1; g <= 2; ++g) {
    ASSERT_TRUE(do_finish(*stub, 0, 3, false, "NaN loss", g).ok());
    form_generation(address, 2, "worker_failed", g + 1, 2);  // restart g of 2
  }
  EXPECT_EQ(server.service().restarts("worker_failed"), 2);
  ASSERT_TRUE(do_finish(*stub, 1, 5, false, "NaN loss", 3).ok());
  pb::RegisterResponse r;
  const grpc::Status st = register_with_cause(address, 0, 2, "worker_failed", &r, 2);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message().rfind("lorafleet-launch --max-restarts (2) exhausted: generation 3 "
                                     "ended (worker_failed: ",
                                     0),
            0u)
      << st.error_message();
  EXPECT_NE(st.error_message().find("after 2 restarts; raise lorafleet-launch --max-restarts "
                                    "(LF_MAX_RESTARTS) to allow more"),
            std::string::npos)
      << st.error_message();
  EXPECT_EQ(server.wait_for(std::chrono::seconds(5)), std::optional<int>(1));
}

TEST_F(CoordinatorTest, PreemptionIsNotCountedAgainstMaxRestarts) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  o.service.max_restarts = 0;
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  auto stub = stub_for(address);
  form_generation(address, 2, "", 1);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(do_finish(*stub, r, 4, true, "", 1, /*preempted=*/true).ok());
  }
  EXPECT_FALSE(server.wait_for(std::chrono::milliseconds(10)).has_value());
  form_generation(address, 2, "preemption", 2);
  EXPECT_EQ(server.service().restarts("preemption"), 1);
  EXPECT_DOUBLE_EQ(labelled_value(server.metrics().serialize(), "lorafleet_restarts_total", "cause",
                                  "preemption"),
                   1.0);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(do_finish(*stub, r, 10, true, "", 2).ok());
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
}

TEST_F(CoordinatorTest, RendezvousTimeoutFailsTheJobNamingTheMissingRanks) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  o.service.rendezvous_timeout = std::chrono::milliseconds(500);
  CoordinatorServer server(config(), o);
  server.start();
  const std::string address = server.address();
  auto stub = stub_for(address);
  form_generation(address, 2, "", 1);
  ASSERT_TRUE(do_finish(*stub, 1, 3, false, "killed", 1).ok());
  // Only rank 0 comes back.
  pb::RegisterResponse r;
  const grpc::Status st = register_with_cause(address, 0, 2, "worker_failed", &r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  const std::optional<int> code = server.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  const std::string why = server.service().end_reason();
  EXPECT_NE(why.find("generation 2 did not form"), std::string::npos) << why;
  EXPECT_NE(why.find("missing ranks 1 "), std::string::npos) << why;
}

TEST_F(CoordinatorTest, StateStoreRoundTrip) {
  const std::string path = state_path();
  const std::string id = StateStore::job_id_for("model: x\n", 42);
  EXPECT_EQ(id.size(), 64u);
  EXPECT_NE(id, StateStore::job_id_for("model: x\n", 43));
  {
    StateStore st(path, id);
    EXPECT_FALSE(st.resumed());
    st.set_world_size(2);
    std::vector<StoredRank> ranks = {{0, "host-a", 11, "cpu", 9410, false, true, false},
                                     {1, "host-b", 12, "cuda:0", 9411, false, true, false}};
    st.record_generation_formed(1, 2, std::string("tmpl\0blob", 9), ranks, "");
    st.record_generation_ended(1, "worker_lost", "rank 1 silent");
    st.record_generation_formed(2, 2, std::string("gen2\0blob", 9), ranks, "worker_lost");
    st.record_rank_finished(1, true, true);
    st.record_plan(0, 2, "digest-0");
    st.record_plan(1, 2, "digest-1");
    st.record_checkpoint_report(10, 0, "/ck/10");
    st.record_commit(10, "/ck/10");
    st.record_checkpoint_report(20, 1, "/ck/20-r1");
    st.record_progress({{0, {21, 42}}, {1, {22, 44}}});
  }
  StateStore st(path, id);
  EXPECT_TRUE(st.resumed());
  const StoredJob j = st.load();
  EXPECT_EQ(j.job_id, id);
  EXPECT_EQ(j.world_size, 2);
  EXPECT_EQ(j.generation, 2u);
  EXPECT_EQ(j.state, GenerationState::kRunning);
  EXPECT_EQ(j.end_cause, "");
  EXPECT_EQ(j.assignment, std::string("gen2\0blob", 9));
  ASSERT_EQ(j.ranks.size(), 2u);
  EXPECT_EQ(j.ranks[0].hostname, "host-a");
  EXPECT_EQ(j.ranks[0].pid, 11);
  EXPECT_EQ(j.ranks[0].metrics_port, 9410);
  EXPECT_FALSE(j.ranks[0].finished);
  EXPECT_EQ(j.ranks[1].device, "cuda:0");
  EXPECT_TRUE(j.ranks[1].finished);
  EXPECT_TRUE(j.ranks[1].ok);
  EXPECT_TRUE(j.ranks[1].preempted);
  ASSERT_EQ(j.plans.size(), 2u);
  EXPECT_EQ(j.plans[1].epoch, 1);
  EXPECT_EQ(j.plans[1].world_size, 2);
  EXPECT_EQ(j.plans[1].digest, "digest-1");
  EXPECT_EQ(j.last_committed_step, 10);
  EXPECT_EQ(j.last_committed_path, "/ck/10");
  ASSERT_EQ(j.pending_checkpoints.size(), 1u);
  EXPECT_EQ(j.pending_checkpoints.at(20).at(1), "/ck/20-r1");
  EXPECT_EQ(j.progress.at(0).global_step, 21);
  EXPECT_EQ(j.progress.at(1).samples, 44);
  EXPECT_EQ(j.restarts.at("worker_lost"), 1);
  EXPECT_FALSE(j.done);
  st.record_generation_ended(2, "preemption", "rank 0 was preempted");
  const StoredJob ended = st.load();
  EXPECT_EQ(ended.state, GenerationState::kEnded);
  EXPECT_EQ(ended.end_cause, "preemption");
  EXPECT_EQ(ended.end_detail, "rank 0 was preempted");
  st.record_job_done(0, "done");
  EXPECT_TRUE(st.load().done);
}

TEST_F(CoordinatorTest, StateOfAnotherUnfinishedJobIsRefusedNamingTheFile) {
  const std::string path = state_path();
  const std::string a = StateStore::job_id_for("job a", 1);
  const std::string b = StateStore::job_id_for("job b", 1);
  { StateStore st(path, a); }
  try {
    StateStore st(path, b);
    FAIL() << "another job's state was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("another job"), std::string::npos) << e.what();
  }
  // Through the server too: a config edited under a running job is refused.
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  EXPECT_THROW(CoordinatorServer(config("  max_train_steps: 11\n"), o), std::runtime_error);
  // Once job a finished, job b starts a fresh record.
  { StateStore(path, a).record_job_done(0, "done"); }
  StateStore st(path, b);
  EXPECT_FALSE(st.resumed());
  EXPECT_EQ(st.load().job_id, b);
  EXPECT_EQ(st.load().generation, 0u);
}

TEST_F(CoordinatorTest, RestartedCoordinatorRestoresTheRunningGeneration) {
  CoordinatorOptions o = fast_options();
  o.metrics_address = "";
  const JobConfig cfg = config();
  {
    CoordinatorServer first(cfg, o);
    first.start();
    const std::string address = first.address();
    auto stub = stub_for(address);
    form_generation(address, 2, "", 1);
    {
      pb::GetEpochPlanRequest req;
      req.set_epoch(0);
      pb::EpochPlan plan;
      grpc::ClientContext ctx;
      set_deadline(&ctx, 10);
      ASSERT_TRUE(stub->GetEpochPlan(&ctx, req, &plan).ok());
    }
    bool committed = false;
    ASSERT_TRUE(do_commit(*stub, 0, 1, 5, &committed).ok());
    ASSERT_TRUE(do_commit(*stub, 1, 1, 5, &committed).ok());
    ASSERT_TRUE(committed);
    ASSERT_TRUE(do_commit(*stub, 1, 1, 8, &committed).ok());  // pending across the restart
    EXPECT_FALSE(committed);
    pb::ProgressAck ack;
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(do_progress(*stub, r, 1, 7, &ack).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a progress batch (tick 50 ms)
    first.shutdown();  // as a kill: the job is not recorded as ended
  }
  CoordinatorServer second(cfg, o);
  second.start();
  EXPECT_EQ(second.service().generation(), 1u);
  EXPECT_TRUE(second.service().generation_running());
  EXPECT_EQ(second.service().registered_count(), 2);
  EXPECT_EQ(second.service().last_committed_step(), 5);
  EXPECT_DOUBLE_EQ(metric_value(second.metrics().serialize(), "lorafleet_generation"), 1.0);
  auto stub = stub_for(second.address());
  // The workers of generation 1 carry on: their reports, plans and commits are accepted.
  pb::ProgressAck ack;
  ASSERT_TRUE(do_progress(*stub, 0, 1, 9, &ack).ok());
  EXPECT_FALSE(ack.stop());
  bool committed = false;
  ASSERT_TRUE(do_commit(*stub, 0, 1, 8, &committed).ok());
  EXPECT_TRUE(committed);  // rank 1's report of step 8 survived the restart
  EXPECT_EQ(second.service().last_committed_step(), 8);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(do_finish(*stub, r, 10, true, "", 1).ok());
  const std::optional<int> code = second.wait_for(std::chrono::seconds(5));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  second.shutdown();
  // The finished job is not restored again: a new run starts fresh.
  CoordinatorServer third(cfg, o);
  EXPECT_EQ(third.service().generation(), 0u);
  EXPECT_EQ(third.service().last_committed_step(), -1);
}

// A coordinator restarted after its job finished (final checkpoint at max_train_steps, exit 0)
// reports the job finished (status, metrics) and ends with exit 0 when no group registers within
// the rendezvous timeout (a Deployment restarting its pod), instead of waiting for workers that
// will never come. A group that does register (a --resume of an older checkpoint, or the job
// run again) trains on a fresh record.
TEST_F(CoordinatorTest, FinishedJobIsReportedFinishedAfterARestart) {
  CoordinatorOptions o = fast_options();  // rendezvous_timeout 1 s
  o.metrics_address = "";
  const JobConfig cfg = config();  // max_train_steps 10
  auto finish_a_generation = [&](CoordinatorServer& server) {
    auto stub = stub_for(server.address());
    form_generation(server.address(), 2, "", 1);
    bool committed = false;
    ASSERT_TRUE(do_commit(*stub, 0, 1, 10, &committed).ok());
    ASSERT_TRUE(do_commit(*stub, 1, 1, 10, &committed).ok());
    ASSERT_TRUE(committed);
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(do_finish(*stub, r, 10, true, "", 1).ok());
    ASSERT_EQ(server.wait_for(std::chrono::seconds(5)), std::optional<int>(0));
    server.shutdown();
  };
  {
    CoordinatorServer first(cfg, o);
    first.start();
    finish_a_generation(first);
  }
  std::string final_checkpoint;
  {
    CoordinatorServer again(cfg, o);
    again.start();
    pb::JobStatus st;
    again.service().fill_status(&st);
    EXPECT_EQ(st.state(), "done");
    EXPECT_EQ(st.global_step(), 10);
    EXPECT_EQ(st.max_train_steps(), 10);
    EXPECT_EQ(st.world_size(), 2);
    EXPECT_EQ(st.last_committed_step(), 10);
    final_checkpoint = st.last_committed_checkpoint();
    EXPECT_FALSE(final_checkpoint.empty());
    EXPECT_EQ(st.end_reason(),
              "the job had already finished (all 2 ranks of generation 1 "
              "finished); final checkpoint " +
                  final_checkpoint + " at global_step 10");
    EXPECT_DOUBLE_EQ(metric_value(again.metrics().serialize(), "lorafleet_global_step"), 10.0);
    // No group within the 1 s rendezvous timeout: exit 0, naming the final checkpoint.
    EXPECT_EQ(again.wait_for(std::chrono::seconds(5)), std::optional<int>(0));
    EXPECT_EQ(again.service().end_reason(), st.end_reason() +
                                                "; no group registered within 1 s "
                                                "(cluster.rendezvous_timeout_seconds)");
    again.shutdown();
  }
  // The record stays finished; this time a group registers: a fresh record that trains.
  CoordinatorServer third(cfg, o);
  third.start();
  EXPECT_EQ(third.service().last_committed_step(), 10);
  finish_a_generation(third);
  EXPECT_EQ(third.service().generation(), 1u);
  EXPECT_EQ(third.service().end_reason().rfind("all 2 ranks of generation 1 finished", 0), 0u)
      << third.service().end_reason();
}

// kohya's training TOML as the job (--config_file), lorafleet's own keys in --config: --inspect
// plans what the equivalent job YAML plans, and a refused argument is one error line.
TEST_F(CoordinatorTest, BinaryInspectsAKohyaTrainingToml) {
  const std::string bin = LF_BINARY_DIR "/coordinator/lorafleet-coordinator";
  const std::string r = root_->string();
  const std::string toml = r + "/kohya_train.toml";
  std::ofstream(toml) << "[model_arguments]\npretrained_model_name_or_path = \"" << r
                      << "/model.safetensors\"\n[dataset_arguments]\ntrain_data_dir = \"" << r
                      << "/train\"\nreg_data_dir = \"" << r
                      << "/reg\"\nresolution = \"256\"\nenable_bucket = true\n"
                         "min_bucket_reso = 128\nmax_bucket_reso = 512\n"
                         "caption_extension = \".txt\"\nxformers = true\n"
                         "[training_arguments]\nseed = 1234\nprior_loss_weight = 0.5\n"
                         "max_train_steps = 10\noutput_dir = \""
                      << r << "/out\"\n";
  const std::string job = r + "/kohya_job.yaml";
  std::ofstream(job) << "model:\n  tokenizer_vocab: " << r << "/vocab.txt.gz\n";
  const auto [rc, out] = run_command(bin + " --config_file " + toml + " --config " + job +
                                     " --inspect --world-size 2");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(toml + ":11: kohya argument 'xformers': ignored: lorafleet decides this "
                            "itself"),
            std::string::npos)
      << out;
  const std::string yaml_path = r + "/kohya_equivalent.yaml";
  std::ofstream(yaml_path) << yaml();
  const auto [yrc, yout] =
      run_command(bin + " --config " + yaml_path + " --inspect --world-size 2");
  ASSERT_EQ(yrc, 0) << yout;
  // The plan (subsets, reg use, buckets, schedule) is the one of the equivalent YAML; the
  // dataset line names its own origin, then the same bucket options.
  ASSERT_NE(out.find("  subsets:\n"), std::string::npos) << out;
  const std::string plan = out.substr(out.find("  subsets:\n"));
  EXPECT_EQ(plan, yout.substr(yout.find("  subsets:\n")));
  const auto options_of = [](const std::string& o) {
    const std::size_t at = o.find(": resolution ");
    return o.substr(at, o.find('\n', at) - at);
  };
  EXPECT_EQ(options_of(out), options_of(yout));
  EXPECT_NE(plan.find("number of train images (including repeats): 6"), std::string::npos) << plan;

  // kohya's sample_prompts is output.sample_prompts (relative to the working directory, as
  // kohya): a missing prompt file stops the job before any worker starts, naming key and path.
  const std::string missing = "missing_prompts_" + std::to_string(::getpid()) + ".txt";
  std::ofstream(toml, std::ios::app) << "sample_prompts = \"" << missing << "\"\n";
  const auto [brc, bout] = run_command(bin + " --config_file " + toml + " --inspect");
  EXPECT_EQ(brc, 3);
  EXPECT_NE(bout.find("lorafleet-coordinator: error: " + toml +
                      " (as job YAML): "
                      "output.sample_prompts: " +
                      (fs::current_path() / missing).string() +
                      ": cannot read the sample prompts file\n"),
            std::string::npos)
      << bout;
}

TEST(CoordinatorBinary, BadConfigIsOneLineErrorAndExitThree) {
  const std::string bin = LF_BINARY_DIR "/coordinator/lorafleet-coordinator";
  if (!fs::exists(bin)) GTEST_SKIP() << bin << " not built";
  const auto [rc, out] = run_command(bin + " --config /nonexistent/job.yaml");
  EXPECT_EQ(rc, 3);  // kExitBadInput: a supervisor must not retry it
  EXPECT_EQ(out.rfind("lorafleet-coordinator: error: /nonexistent/job.yaml", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace
}  // namespace lf
