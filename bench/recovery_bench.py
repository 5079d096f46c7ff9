#!/usr/bin/env python3
"""Recovery time of lorafleet after a worker is killed (issue 5).

Runs a coordinator and `lorafleet-launch --nproc 2` workers (Kubernetes-native mode, Gloo) on the
tiny model and a copy of the demo photos, SIGKILLs rank 1 once a checkpoint is committed, and
measures from the kill to the first step completed by the restarted group (the first progress
line after rank 0's "resumed from"). Also reports the split: kill -> launcher notices, restart
backoff, process start + model load + rendezvous, first step. Prints one JSON line per trial.

Peer (`--peer both`, the default; `lorafleet` or `torchrun` runs one side only): PyTorch's own
elastic launcher, `torchrun --nproc-per-node 2 --max-restarts 3 --rdzv-backend c10d` running
bench/recovery_peer_torchrun.py (DDP over Gloo on a frozen conv UNet of the tiny preset's size
with rank-4 LoRA adapters, checkpoint every 2 steps, resume from the newest on start). Rank 1's
worker is SIGKILLed once the step-4 checkpoint exists, and the recovery time is measured from the
kill to the first "step" line after the restarted group's "resumed from", split into: kill ->
agent notices ("failed (exitcode"), stop the survivors + re-rendezvous + spawn (up to the new
rank 0's first line, printed before `import torch`), import torch + init_process_group + model +
checkpoint load, first step. Trials alternate lorafleet / torchrun; the last line gives both
medians and the ratio lorafleet/torchrun.
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


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def lorafleet_trial(args, trial):
    coord_bin = os.path.join(args.build, "coordinator/lorafleet-coordinator")
    worker_bin = os.path.join(args.build, "worker/lorafleet-worker")
    launch_bin = os.path.join(args.build, "worker/lorafleet-launch")
    mk_bin = os.path.join(args.build, "worker/lorafleet-make-checkpoint")
    demo = os.path.join(ROOT, ".deps/demo/train/10_photo")
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
        "side": "lorafleet",
        "trial": trial,
        "recovery_seconds": round(events["first_step"] - kill_at, 2),
        "kill_to_noticed": round(events["noticed"] - kill_at, 2),
        "noticed_to_restarted": round(events["restarted"] - events["noticed"], 2),
        "restarted_to_resumed": round(events["resumed"] - events["restarted"], 2),
        "resumed_to_first_step": round(events["first_step"] - events["resumed"], 2),
    }
    shutil.rmtree(d, ignore_errors=True)
    return r


def torchrun_trial(args, trial):
    d = tempfile.mkdtemp(prefix="lf_recovery_peer_")
    ckpt_dir = os.path.join(d, "ckpt")
    port = free_port()
    env = dict(os.environ, LOGLEVEL="INFO", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [args.torchrun, "--nproc-per-node", "2", "--max-restarts", "3", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{port}",
         os.path.join(ROOT, "bench/recovery_peer_torchrun.py"), "--ckpt-dir", ckpt_dir,
         "--max-steps", str(args.peer_steps), "--save-every", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
        start_new_session=True)
    events = {}
    lines = []

    def reader():
        resumed = False
        for line in proc.stdout:
            now = time.monotonic()
            lines.append(line)
            if "kill_at" not in events:
                continue
            if "failed (exitcode" in line and "noticed" not in events:
                events["noticed"] = now
            if line.startswith("start restart=") and "restart=0" not in line \
                    and "started" not in events:
                events["started"] = now
            if line.startswith("resumed from") and "started" in events and not resumed:
                resumed = True
                events["resumed"] = now
            elif resumed and re.match(r"step \d+", line) and "first_step" not in events:
                events["first_step"] = now

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        pid_file = os.path.join(ckpt_dir, "pid.rank1.restart0")
        deadline = time.monotonic() + 300
        while True:
            steps = [int(m.group(1)) for m in
                     (re.fullmatch(r"step-(\d+)\.pt", n) for n in
                      (os.listdir(ckpt_dir) if os.path.isdir(ckpt_dir) else [])) if m]
            if steps and max(steps) >= 4 and os.path.isfile(pid_file):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.stderr.write("".join(lines[-40:]))
                raise SystemExit("torchrun trial %d: no checkpoint at step 4" % trial)
            time.sleep(0.02)
        with open(pid_file) as f:
            victim = int(f.read())
        events["kill_at"] = kill_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            sys.stderr.write("".join(lines[-60:]))
            raise
        t.join(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            # torchrun starts each worker in its own session: end them by their pid files
            for n in (os.listdir(ckpt_dir) if os.path.isdir(ckpt_dir) else []):
                if n.startswith("pid."):
                    try:
                        with open(os.path.join(ckpt_dir, n)) as f:
                            os.kill(int(f.read()), signal.SIGKILL)
                    except (OSError, ValueError):
                        pass
    if "first_step" not in events or proc.returncode != 0:
        sys.stderr.write("".join(lines[-40:]))
        raise SystemExit("torchrun trial %d: no step after the restart (rc %s)"
                         % (trial, proc.returncode))
    resumed_line = next(ln for ln in lines if ln.startswith("resumed from"))
    r = {
        "side": "torchrun",
        "trial": trial,
        "recovery_seconds": round(events["first_step"] - kill_at, 2),
        "kill_to_noticed": round(events["noticed"] - kill_at, 2),
        "noticed_to_started": round(events["started"] - events["noticed"], 2),
        "started_to_resumed": round(events["resumed"] - events["started"], 2),
        "resumed_to_first_step": round(events["first_step"] - events["resumed"], 2),
        "resumed_step": int(re.match(r"resumed from step (\d+)", resumed_line).group(1)),
    }
    shutil.rmtree(d, ignore_errors=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--backoff", type=float, default=0.5, help="lorafleet-launch --restart-backoff")
    ap.add_argument("--peer", choices=("both", "lorafleet", "torchrun"), default="both",
                    help="which side(s) to run (default both, alternating, with the ratio)")
    ap.add_argument("--torchrun", default=os.path.join(os.path.dirname(sys.executable), "torchrun"),
                    help="torchrun of the Python running this script (default)")
    ap.add_argument("--peer-steps", type=int, default=30,
                    help="training steps of the torchrun peer (killed at step 4)")
    args = ap.parse_args()
    sides = {"both": ("lorafleet", "torchrun")}.get(args.peer, (args.peer,))
    results = {side: [] for side in sides}
    for trial in range(args.trials):
        for side in sides:
            r = (lorafleet_trial if side == "lorafleet" else torchrun_trial)(args, trial)
            print(json.dumps(r), flush=True)
            results[side].append(r)
    final = {"trials": args.trials}
    for side, rs in results.items():
        final[f"{side}_median_recovery_seconds"] = median([r["recovery_seconds"] for r in rs])
        final[f"{side}_median_phases"] = {
            k: median([r[k] for r in rs]) for k in rs[0]
            if k not in ("side", "trial", "recovery_seconds", "resumed_step")}
    if len(sides) == 2:
        final["ratio_lorafleet_over_torchrun"] = round(
            final["lorafleet_median_recovery_seconds"] / final["torchrun_median_recovery_seconds"],
            3)
    print(json.dumps(final), flush=True)


if __name__ == "__main__":
    main()
