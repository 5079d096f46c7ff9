#!/usr/bin/env python3
"""Recovery time of lorafleet after a worker is killed (issue 5).

Runs a coordinator and `lorafleet-launch --nproc 2` workers (Kubernetes-native mode, Gloo) on the
tiny model and a copy of the demo photos, SIGKILLs rank 1 once a checkpoint is committed, and
measures from the kill to the first step completed by the restarted group (the first progress
line after rank 0's "resumed from"). Also reports the split: kill -> launcher notices, restart
backoff, process start + model load + rendezvous, first step. Prints one JSON line per trial.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--backoff", type=float, default=0.5, help="lorafleet-launch --restart-backoff")
    args = ap.parse_args()
    coord_bin = os.path.join(args.build, "coordinator/lorafleet-coordinator")
    worker_bin = os.path.join(args.build, "worker/lorafleet-worker")
    launch_bin = os.path.join(args.build, "worker/lorafleet-launch")
    mk_bin = os.path.join(args.build, "worker/lorafleet-make-checkpoint")
    demo = os.path.join(ROOT, ".deps/demo/train/10_photo")
    results = []
    for trial in range(args.trials):
        d = tempfile.mkdtemp(prefix="lf_recovery_")
        os.makedirs(os.path.join(d, "train/2_photo"))
        for stem in ("astronaut", "chelsea", "coffee"):
            for ext in (".png", ".txt"):
                shutil.copy(os.path.join(demo, stem + ext), os.path.join(d, "train/2_photo"))
        subprocess.run([mk_bin, "--architecture", "tiny", "--seed", "7", "--output",
                        os.path.join(d, "base.safetensors")], check=True, capture_output=True)
        port = free_port()
        with open(os.path.join(d, "job.yaml"), "w") as f:
            f.write(f"""model:
  pretrained_model_name_or_path: {d}/base.safetensors
  architecture: tiny
  tokenizer_vocab: {ROOT}/.deps/bpe_simple_vocab_16e6.txt.gz
dataset:
  train_data_dir: {d}/train
  resolution: 128
  min_bucket_reso: 64
  max_bucket_reso: 256
  caption_extension: .txt
training:
  seed: 5
  max_train_epochs: 8
  save_every_n_steps: 2
output:
  output_dir: {d}/out
coordinator:
  listen_address: 127.0.0.1:{port}
  metrics_address: ""
worker:
  metrics_port_base: 0
cluster:
  world_size: 2
  collective_timeout: 10
""")
        coord = subprocess.Popen([coord_bin, "--config", os.path.join(d, "job.yaml")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        launch = subprocess.Popen(
            [launch_bin, "--nproc", "2", "--restart-backoff", str(args.backoff), "--",
             worker_bin, "--coordinator", f"127.0.0.1:{port}", "--no-progress-bar"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        events = {}
        lines = []

        def reader():
            resumed = False
            for line in launch.stdout:
                now = time.monotonic()
                lines.append(line)
                if "killed by signal 9" in line and "noticed" not in events:
                    events["noticed"] = now
                if "restarted 2 ranks" in line and "restarted" not in events:
                    events["restarted"] = now
                if "resumed from" in line and not resumed:
                    resumed = True
                    events["resumed"] = now
                elif resumed and re.search(r"\d+/\d+ \[", line) and "first_step" not in events:
                    events["first_step"] = now

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        ckpt = os.path.join(d, "out/checkpoints/step-00000004")
        while not os.path.isfile(os.path.join(ckpt, "COMMITTED")):
            time.sleep(0.02)
        pids = subprocess.run(["pgrep", "-f", f"^{worker_bin} --coordinator 127.0.0.1:{port} "],
                              capture_output=True, text=True).stdout.split()
        kill_at = time.monotonic()
        os.kill(int(pids[-1]), signal.SIGKILL)
        launch.wait(timeout=600)
        t.join(timeout=10)
        coord.wait(timeout=60)
        if "first_step" not in events:
            sys.stderr.write("".join(lines[-40:]))
            raise SystemExit("trial %d: no step after the restart" % trial)
        r = {
            "trial": trial,
            "recovery_seconds": round(events["first_step"] - kill_at, 2),
            "kill_to_noticed": round(events["noticed"] - kill_at, 2),
            "noticed_to_restarted": round(events["restarted"] - events["noticed"], 2),
            "restarted_to_resumed": round(events["resumed"] - events["restarted"], 2),
            "resumed_to_first_step": round(events["first_step"] - events["resumed"], 2),
        }
        print(json.dumps(r), flush=True)
        results.append(r["recovery_seconds"])
        shutil.rmtree(d, ignore_errors=True)
    results.sort()
    print(json.dumps({"median_recovery_seconds": results[len(results) // 2],
                      "trials": len(results)}))


if __name__ == "__main__":
    main()
