#!/usr/bin/env python3
"""Offline checks of deploy/k8s (ctest: deploy_validate_k8s). No cluster, no network.

1. Every manifest parses. Built-in kinds (Deployment, Service, Job, ConfigMap, Secret, PVC) are
   validated with kubernetes-validate's bundled, strict (no unknown fields) OpenAPI schemas for
   Kubernetes KUBERNETES_VERSION. The Job and Pod templates embedded in the CRD kinds (JobSet,
   MPIJob) are validated the same way.
2. CRD kinds (JobSet, MPIJob, PodMonitor, ServiceMonitor) have apiVersion/kind/metadata.name, only
   known spec keys, and the fields lorafleet relies on.
3. The manifests agree with the job config in the ConfigMap and with each other: world size,
   restart budget, grace period, ports, token path, labels the monitors select, the kustomizations.
4. The Grafana dashboard parses, every panel has targets, and every metric name in its PromQL is
   one lorafleet registers (grepped from the metrics sources) or one listed in METRICS_BEING_ADDED.

Usage: validate_k8s.py [--k8s-dir DIR] [--root DIR] [--kubernetes-version X.Y.Z]
Exit 0 when everything holds; 1 with one line per problem otherwise.
"""
import argparse
import glob
import json
import os
import re
import sys

try:
    import yaml
    import kubernetes_validate
except ImportError as e:  # scripts/install_deps.sh installs both into .venv
    print(f"validate_k8s: error: {e}; run scripts/install_deps.sh "
          "(it pip-installs kubernetes-validate into .venv)", file=sys.stderr)
    sys.exit(1)

KUBERNETES_VERSION = "1.30.0"  # podFailurePolicy is beta (on by default) in 1.26-1.30, GA in 1.31

# Metrics that other changes of issue #5 are adding and that the dashboard already uses. Drop a
# name from here once it is registered in METRIC_SOURCES (the script says so when it is).
METRICS_BEING_ADDED = {
    "lorafleet_restarts_total": "counter",            # {cause}: group restarts by cause
    "lorafleet_generation": "gauge",                  # worker-group generation
    "lorafleet_gpu_memory_allocated_bytes": "gauge",  # {rank}: CUDA caching allocator
}

# Files that register lorafleet_* metrics (the real names).
METRIC_SOURCES = ["coordinator/coordinator_metrics.cpp", "worker/app/worker_metrics.cpp"]

CRD_GROUPS = ("jobset.x-k8s.io/", "kubeflow.org/", "monitoring.coreos.com/")

# Top-level spec keys of the CRD versions we target (JobSet v0.6+, mpi-operator v0.5+,
# Prometheus Operator v0.7x): anything else is a typo the API server would drop or refuse.
CRD_SPEC_KEYS = {
    "JobSet": {"replicatedJobs", "network", "successPolicy", "failurePolicy", "startupPolicy",
               "suspend", "coordinator", "managedBy", "ttlSecondsAfterFinished"},
    "MPIJob": {"slotsPerWorker", "runLauncherAsWorker", "runPolicy", "mpiReplicaSpecs",
               "sshAuthMountPath", "launcherCreationPolicy", "mpiImplementation"},
    "PodMonitor": {"jobLabel", "podTargetLabels", "podMetricsEndpoints", "selector",
                   "namespaceSelector", "sampleLimit", "targetLimit", "labelLimit",
                   "labelNameLengthLimit", "labelValueLengthLimit", "attachMetadata",
                   "scrapeProtocols", "scrapeClass", "keepDroppedTargets", "selectorMechanism",
                   "bodySizeLimit", "fallbackScrapeProtocol"},
    "ServiceMonitor": {"jobLabel", "targetLabels", "podTargetLabels", "endpoints", "selector",
                       "namespaceSelector", "sampleLimit", "targetLimit", "labelLimit",
                       "labelNameLengthLimit", "labelValueLengthLimit", "attachMetadata",
                       "scrapeProtocols", "scrapeClass", "keepDroppedTargets",
                       "selectorMechanism", "bodySizeLimit", "fallbackScrapeProtocol"},
}
ENDPOINT_KEYS = {"port", "portNumber", "targetPort", "path", "scheme", "params", "interval",
                 "scrapeTimeout", "honorLabels", "honorTimestamps", "trackTimestampsStaleness",
                 "relabelings", "metricRelabelings", "tlsConfig", "bearerTokenSecret",
                 "bearerTokenFile", "basicAuth", "authorization", "oauth2", "proxyUrl",
                 "followRedirects", "enableHttp2", "filterRunning", "noProxy",
                 "proxyFromEnvironment", "proxyConnectHeader", "scrapeProtocols"}
RELABEL_KEYS = {"sourceLabels", "separator", "targetLabel", "regex", "modulus", "replacement",
                "action"}
RELABEL_ACTIONS = {"replace", "keep", "drop", "hashmod", "labelmap", "labeldrop", "labelkeep",
                   "lowercase", "uppercase", "keepequal", "dropequal"}

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool",
                   "and", "or", "unless", "offset", "atan2", "inf", "nan"}


class Checker:
    def __init__(self, root, k8s_dir, version):
        self.root = root
        self.k8s_dir = k8s_dir
        self.version = version
        self.errors = []
        self.notes = []
        self.docs = []  # (relative file, document)

    def err(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    def rel(self, path):
        return os.path.relpath(path, self.k8s_dir)

    # ---------------------------------------------------------------- loading
    def load(self):
        files = sorted(glob.glob(os.path.join(self.k8s_dir, "**", "*.yaml"), recursive=True))
        self.manifest_files = [f for f in files if os.path.basename(f) != "kustomization.yaml"]
        self.kustomizations = [f for f in files if os.path.basename(f) == "kustomization.yaml"]
        if not self.manifest_files:
            self.err(self.k8s_dir, "no manifests found")
        for f in self.manifest_files:
            try:
                with open(f) as fh:
                    docs = [d for d in yaml.safe_load_all(fh) if d is not None]
            except yaml.YAMLError as e:
                self.err(self.rel(f), f"YAML does not parse: {e}")
                continue
            for d in docs:
                where = self.rel(f)
                if not isinstance(d, dict):
                    self.err(where, "a document is not a mapping")
                    continue
                for key in ("apiVersion", "kind"):
                    if not isinstance(d.get(key), str) or not d.get(key):
                        self.err(where, f"missing {key}")
                name = (d.get("metadata") or {}).get("name")
                if not name:
                    self.err(where, f"{d.get('kind')} without metadata.name")
                if (d.get("metadata") or {}).get("namespace"):
                    self.err(where, f"{d.get('kind')}/{name}: metadata.namespace is set; the "
                             "manifests are namespace-agnostic")
                self.docs.append((where, d))

    def find(self, kind, name=None):
        out = [(f, d) for f, d in self.docs if d.get("kind") == kind and
               (name is None or (d.get("metadata") or {}).get("name") == name)]
        return out

    def one(self, kind, name):
        found = self.find(kind, name)
        if len(found) != 1:
            self.err("deploy/k8s", f"expected exactly one {kind}/{name}, found {len(found)}")
            return None, None
        return found[0]

    # ---------------------------------------------------------------- schemas
    def kv(self, where, doc):
        """Validate one built-in object strictly against the pinned Kubernetes version."""
        try:
            kubernetes_validate.validate(doc, self.version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.absolute_path) or "(top)"
            self.err(where, f"{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}: "
                     f"{path}: {e.message} (Kubernetes {self.version} schema)")
        except (kubernetes_validate.SchemaNotFoundError,
                kubernetes_validate.utils.VersionNotSupportedError) as e:
            self.err(where, e.message)

    def validate_builtins(self):
        for where, d in self.docs:
            api = str(d.get("apiVersion", ""))
            if api.startswith(CRD_GROUPS):
                continue
            self.kv(where, d)

    def validate_embedded_job(self, where, name, job_template):
        self.kv(where, {"apiVersion": "batch/v1", "kind": "Job",
                        "metadata": dict(job_template.get("metadata") or {}, name=name),
                        "spec": job_template.get("spec")})

    def validate_embedded_pod(self, where, name, pod_template):
        self.kv(where, {"apiVersion": "v1", "kind": "Pod",
                        "metadata": dict(pod_template.get("metadata") or {}, name=name),
                        "spec": pod_template.get("spec")})

    # ---------------------------------------------------------------- job config
    def job_config(self):
        where, cm = self.one("ConfigMap", "lorafleet-job")
        if cm is None:
            return {}
        text = (cm.get("data") or {}).get("job.yaml")
        if not text:
            self.err(where, "ConfigMap lorafleet-job has no data.job.yaml")
            return {}
        try:
            cfg = yaml.safe_load(text)
        except yaml.YAMLError as e:
            self.err(where, f"job.yaml does not parse: {e}")
            return {}
        self.check_config_keys(where, cfg)
        co = cfg.get("coordinator") or {}
        if co.get("listen_address") != "0.0.0.0:50051":
            self.err(where, "coordinator.listen_address must be 0.0.0.0:50051 in-cluster")
        if co.get("metrics_address") != "0.0.0.0:9400":
            self.err(where, "coordinator.metrics_address must be 0.0.0.0:9400 in-cluster")
        if not co.get("job_token_file"):
            self.err(where, "coordinator.job_token_file is required with a non-loopback listen_address")
        if (cfg.get("worker") or {}).get("metrics_host") != "0.0.0.0":
            self.err(where, "worker.metrics_host must be 0.0.0.0 to be scraped")
        out = (cfg.get("output") or {}).get("output_dir", "")
        if not str(out).startswith("/data/"):
            self.err(where, "output.output_dir must be on the shared volume (/data/...)")
        cl = cfg.get("cluster") or {}
        for key in ("world_size", "collective_timeout", "preempt_grace_seconds", "max_restarts"):
            if not isinstance(cl.get(key), int):
                self.err(where, f"cluster.{key} must be set (an integer)")
        return cfg

    def check_config_keys(self, where, cfg):
        """Every section.key of job.yaml is documented in docs/configuration.md."""
        doc_path = os.path.join(self.root, "docs", "configuration.md")
        try:
            text = open(doc_path).read()
        except OSError:
            self.notes.append("docs/configuration.md not found: job.yaml keys not checked")
            return
        sections = {}
        current = None
        for line in text.splitlines():
            m = re.match(r"^##+ `?([a-z_]+)`?(?::|\s|$)", line)
            if m:
                current = m.group(1)
            if line.startswith("|") and current:
                first = line.split("|")[1]
                for key in re.findall(r"`([a-z_0-9]+)`", first):
                    sections.setdefault(current, set()).add(key)
        dataset_keys = set().union(*[v for k, v in sections.items()
                                     if k in ("dataset", "datasets")] or [set()])
        for section, body in (cfg or {}).items():
            if not isinstance(body, dict):
                continue
            known = dataset_keys if section == "dataset" else sections.get(section)
            if known is None:
                self.err(where, f"job.yaml: section '{section}' is not in docs/configuration.md")
                continue
            for key in body:
                if section == "dataset" and key in text:
                    continue  # dataset keys are spread over several tables
                if key not in known:
                    self.err(where, f"job.yaml: key '{section}.{key}' is not in docs/configuration.md")

    # ---------------------------------------------------------------- pod templates
    def container(self, where, pod_spec, name):
        for c in (pod_spec or {}).get("containers") or []:
            if c.get("name") == name:
                return c
        self.err(where, f"no container named '{name}'")
        return {}

    def env(self, container):
        return {e.get("name"): e for e in container.get("env") or []}

    def mounts(self, pod_spec, container):
        vols = {v.get("name"): v for v in (pod_spec or {}).get("volumes") or []}
        return {m.get("mountPath"): vols.get(m.get("name"), {}) for m in
                container.get("volumeMounts") or []}

    def check_volumes(self, where, pod_spec, container, token_file, token_in_pod=True):
        mounts = self.mounts(pod_spec, container)
        data = mounts.get("/data", {})
        if (data.get("persistentVolumeClaim") or {}).get("claimName") != "lorafleet-data":
            self.err(where, "the lorafleet-data PVC is not mounted at /data")
        if token_in_pod:
            tdir = os.path.dirname(token_file)
            sec = mounts.get(tdir, {}).get("secret") or {}
            if sec.get("secretName") != "lorafleet-job-token":
                self.err(where, f"the lorafleet-job-token Secret is not mounted at {tdir}")
            mode = sec.get("defaultMode", 0o644)
            if not mode & 0o040:
                self.err(where, "the token Secret's defaultMode must let the group (fsGroup) read it")

    def check_worker_pod(self, where, pod_tmpl, cfg, env_mode=True):
        spec = pod_tmpl.get("spec") or {}
        labels = (pod_tmpl.get("metadata") or {}).get("labels") or {}
        if labels.get("app.kubernetes.io/component") != "worker" or \
                labels.get("app.kubernetes.io/name") != "lorafleet":
            self.err(where, "worker pods need the labels the PodMonitor selects "
                     "(app.kubernetes.io/name: lorafleet, app.kubernetes.io/component: worker)")
        c = self.container(where, spec, "worker")
        cl = cfg.get("cluster") or {}
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if isinstance(cl.get("preempt_grace_seconds"), int) and grace <= cl["preempt_grace_seconds"]:
            self.err(where, f"terminationGracePeriodSeconds {grace} must exceed "
                     f"cluster.preempt_grace_seconds {cl['preempt_grace_seconds']}")
        token_file = (cfg.get("coordinator") or {}).get("job_token_file", "")
        base = (cfg.get("worker") or {}).get("metrics_port_base")
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
        if ports.get("metrics") != base:
            self.err(where, f"the worker's 'metrics' containerPort must be worker.metrics_port_base "
                     f"({base}), got {ports.get('metrics')}")
        if env_mode:
            if spec.get("restartPolicy") != "Never":
                self.err(where, "worker pods need restartPolicy Never (podFailurePolicy)")
            cmd = (c.get("command") or []) + (c.get("args") or [])
            if "lorafleet-worker" not in cmd or "--launcher" not in cmd or \
                    cmd[cmd.index("--launcher") + 1:cmd.index("--launcher") + 2] != ["env"]:
                self.err(where, "the worker must run 'lorafleet-worker --launcher env'")
            env = self.env(c)
            if (env.get("LF_COORDINATOR") or {}).get("value") != "lorafleet-coordinator:50051":
                self.err(where, "LF_COORDINATOR must be lorafleet-coordinator:50051")
            if (env.get("LF_RESUME") or {}).get("value") != "auto":
                self.err(where, "LF_RESUME must be auto")
            if (env.get("LF_JOB_TOKEN_FILE") or {}).get("value") != token_file:
                self.err(where, f"LF_JOB_TOKEN_FILE must be coordinator.job_token_file ({token_file})")
            field = (((env.get("LF_ADVERTISE_ADDRESS") or {}).get("valueFrom") or {})
                     .get("fieldRef") or {}).get("fieldPath")
            if field != "status.podIP":
                self.err(where, "LF_ADVERTISE_ADDRESS must come from the downward API status.podIP")
            if "LF_RANK" in env or "RANK" in env:
                self.err(where, "do not set LF_RANK/RANK: the rank is JOB_COMPLETION_INDEX")
        self.check_volumes(where, spec, c, token_file)

    def check_pod_failure_policy(self, where, pfp):
        rules = (pfp or {}).get("rules") or []

        def codes(rule, op):
            ec = rule.get("onExitCodes") or {}
            return set(ec.get("values") or []) if ec.get("operator") == op else set()

        ignore_disruption = any(r.get("action") == "Ignore" and any(
            c.get("type") == "DisruptionTarget" for c in r.get("onPodConditions") or [])
            for r in rules)
        if not ignore_disruption:
            self.err(where, "podFailurePolicy must Ignore the DisruptionTarget condition")
        # First matching rule wins: 143 and 3 must be decided before any catch-all.
        first = {}
        for r in rules:
            for code in (143, 3, 75, 1):
                if code in first:
                    continue
                if code in codes(r, "In") or (r.get("onExitCodes", {}).get("operator") == "NotIn"
                                              and code not in codes(r, "NotIn")):
                    first[code] = r.get("action")
        want = {143: "Ignore", 3: "FailJob", 75: "Count", 1: "Count"}
        for code, action in want.items():
            if first.get(code, "Count") != action:
                self.err(where, f"podFailurePolicy: exit code {code} must be {action}, "
                         f"the first matching rule says {first.get(code)}")
        for r in rules:
            ec = r.get("onExitCodes")
            if ec and ec.get("containerName") not in (None, "worker"):
                self.err(where, f"podFailurePolicy rule names container {ec.get('containerName')}")

    # ---------------------------------------------------------------- kinds
    def check_coordinator(self, cfg):
        where, dep = self.one("Deployment", "lorafleet-coordinator")
        if dep is not None:
            spec = dep.get("spec") or {}
            if spec.get("replicas") != 1:
                self.err(where, "the coordinator Deployment must have replicas: 1")
            if (spec.get("strategy") or {}).get("type") != "Recreate":
                self.err(where, "the coordinator Deployment must use strategy Recreate")
            pod = (spec.get("template") or {}).get("spec") or {}
            c = self.container(where, pod, "coordinator")
            cmd = (c.get("command") or []) + (c.get("args") or [])
            if "--config" not in cmd:
                self.err(where, "the coordinator needs --config")
            else:
                cfg_path = cmd[cmd.index("--config") + 1] if cmd.index("--config") + 1 < len(cmd) else ""
                m = self.mounts(pod, c).get(os.path.dirname(cfg_path), {})
                if (m.get("configMap") or {}).get("name") != "lorafleet-job":
                    self.err(where, f"--config {cfg_path} is not in the mounted lorafleet-job ConfigMap")
            ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
            if ports != {"grpc": 50051, "metrics": 9400}:
                self.err(where, f"coordinator ports must be grpc 50051 and metrics 9400, got {ports}")
            for probe in ("readinessProbe", "livenessProbe"):
                hg = (c.get(probe) or {}).get("httpGet") or {}
                if hg.get("path") != "/metrics" or hg.get("port") not in ("metrics", 9400):
                    self.err(where, f"{probe} must GET /metrics on the metrics port")
            psc = pod.get("securityContext") or {}
            csc = c.get("securityContext") or {}
            if not psc.get("runAsNonRoot") or not csc.get("readOnlyRootFilesystem"):
                self.err(where, "the coordinator must run as non-root with a read-only root filesystem")
            self.check_volumes(where, pod, c, (cfg.get("coordinator") or {}).get("job_token_file", ""))
        where, svc = self.one("Service", "lorafleet-coordinator")
        if svc is not None:
            ports = {p.get("name"): p.get("port") for p in (svc.get("spec") or {}).get("ports") or []}
            if ports != {"grpc": 50051, "metrics": 9400}:
                self.err(where, f"Service ports must be grpc 50051 and metrics 9400, got {ports}")
            sel = (svc.get("spec") or {}).get("selector") or {}
            tl = (((dep or {}).get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels", {})
            if not sel or any(tl.get(k) != v for k, v in sel.items()):
                self.err(where, "the Service selector does not match the coordinator pods")
        where, pvc = self.one("PersistentVolumeClaim", "lorafleet-data")
        if pvc is not None and "ReadWriteMany" not in (pvc.get("spec") or {}).get("accessModes", []):
            self.err(where, "the data PVC must be ReadWriteMany (every rank reads and writes it)")
        where, sec = self.one("Secret", "lorafleet-job-token")
        if sec is not None:
            if "token" not in (sec.get("stringData") or {}) and "token" not in (sec.get("data") or {}):
                self.err(where, "the Secret must hold the key 'token'")

    def check_indexed_job(self, cfg):
        where, job = self.one("Job", "lorafleet-workers")
        if job is None:
            return None
        spec = job.get("spec") or {}
        cl = cfg.get("cluster") or {}
        ws, mr = cl.get("world_size"), cl.get("max_restarts")
        if spec.get("completionMode") != "Indexed":
            self.err(where, "the workers Job must be completionMode: Indexed")
        if not (spec.get("completions") == spec.get("parallelism") == ws):
            self.err(where, f"completions and parallelism must equal cluster.world_size ({ws})")
        if isinstance(ws, int) and isinstance(mr, int) and spec.get("backoffLimit") != ws * mr:
            self.err(where, f"backoffLimit must be cluster.max_restarts x world_size = {ws * mr}")
        self.check_pod_failure_policy(where, spec.get("podFailurePolicy"))
        self.check_worker_pod(where, spec.get("template") or {}, cfg)
        return spec.get("template")

    def check_crd_spec_keys(self, where, d):
        kind = d.get("kind")
        unknown = set((d.get("spec") or {}).keys()) - CRD_SPEC_KEYS.get(kind, set())
        if unknown:
            self.err(where, f"{kind}: unknown spec keys {sorted(unknown)}")

    def check_jobset(self, cfg, indexed_template):
        found = self.find("JobSet")
        if not found:
            self.err("deploy/k8s", "no JobSet variant")
        for where, js in found:
            name = js["metadata"]["name"]
            if js.get("apiVersion") != "jobset.x-k8s.io/v1alpha2":
                self.err(where, "JobSet must be jobset.x-k8s.io/v1alpha2")
            self.check_crd_spec_keys(where, js)
            spec = js.get("spec") or {}
            cl = cfg.get("cluster") or {}
            fp = spec.get("failurePolicy") or {}
            if fp.get("maxRestarts") != cl.get("max_restarts"):
                self.err(where, "failurePolicy.maxRestarts must be cluster.max_restarts")
            rules = fp.get("rules") or []
            if not any(r.get("action") == "FailJobSet" and "PodFailurePolicy" in
                       (r.get("onJobFailureReasons") or []) for r in rules):
                self.err(where, "failurePolicy needs a FailJobSet rule on reason PodFailurePolicy "
                         "(exit 3 must not restart the group)")
            for r in rules:
                if not re.match(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", str(r.get("name", ""))):
                    self.err(where, f"failurePolicy rule name {r.get('name')!r} is invalid")
            rjs = spec.get("replicatedJobs") or []
            if len(rjs) != 1:
                self.err(where, "expected one replicatedJob (the workers)")
                continue
            rj = rjs[0]
            if rj.get("replicas") != 1:
                self.err(where, "the workers replicatedJob has replicas: 1 (one Indexed Job of "
                         "world_size pods, so JOB_COMPLETION_INDEX is the rank)")
            tmpl = rj.get("template") or {}
            self.validate_embedded_job(where, f"{name}-{rj.get('name')}", tmpl)
            jspec = tmpl.get("spec") or {}
            if jspec.get("completionMode") != "Indexed":
                self.err(where, "the replicatedJob must be completionMode: Indexed")
            if not (jspec.get("completions") == jspec.get("parallelism") == cl.get("world_size")):
                self.err(where, "completions and parallelism must equal cluster.world_size")
            if jspec.get("backoffLimit") != 0:
                self.err(where, "the inner Job's backoffLimit must be 0 (the JobSet restarts the group)")
            self.check_pod_failure_policy(where, jspec.get("podFailurePolicy"))
            self.check_worker_pod(where, jspec.get("template") or {}, cfg)
            if indexed_template is not None and jspec.get("template") != indexed_template:
                self.err(where, "the JobSet's pod template differs from workers-indexed-job.yaml's; "
                         "keep them identical")

    def check_mpijob(self, cfg):
        found = self.find("MPIJob")
        if not found:
            self.err("deploy/k8s", "no MPIJob variant")
        for where, mj in found:
            name = mj["metadata"]["name"]
            if mj.get("apiVersion") != "kubeflow.org/v2beta1":
                self.err(where, "MPIJob must be kubeflow.org/v2beta1")
            self.check_crd_spec_keys(where, mj)
            spec = mj.get("spec") or {}
            cl = cfg.get("cluster") or {}
            if spec.get("slotsPerWorker") != 1:
                self.err(where, "slotsPerWorker must be 1 (one rank per worker pod)")
            rs = spec.get("mpiReplicaSpecs") or {}
            if set(rs) != {"Launcher", "Worker"}:
                self.err(where, f"mpiReplicaSpecs must have Launcher and Worker, got {sorted(rs)}")
                continue
            la, wo = rs["Launcher"], rs["Worker"]
            for role, r in (("Launcher", la), ("Worker", wo)):
                self.validate_embedded_pod(where, f"{name}-{role.lower()}", r.get("template") or {})
                if r.get("restartPolicy") not in ("Never", "OnFailure", "Always", "ExitCode"):
                    self.err(where, f"{role}.restartPolicy {r.get('restartPolicy')!r} is invalid")
            if la.get("replicas") != 1:
                self.err(where, "Launcher.replicas must be 1")
            if wo.get("replicas") != cl.get("world_size"):
                self.err(where, "Worker.replicas must be cluster.world_size")
            if (spec.get("runPolicy") or {}).get("backoffLimit") != cl.get("max_restarts"):
                self.err(where, "runPolicy.backoffLimit must be cluster.max_restarts")
            if la.get("restartPolicy") != "ExitCode":
                self.err(where, "Launcher.restartPolicy must be ExitCode (exit 3 is final)")
            lspec = (la.get("template") or {}).get("spec") or {}
            lc = self.container(where, lspec, "launcher")
            cmd = (lc.get("command") or []) + (lc.get("args") or [])
            # lorafleet-launch -- mpirun ...: it restarts mpirun, not on exit 3, until the
            # coordinator's cluster.max_restarts (the job's one budget) refuses the group.
            if not cmd or cmd[0] != "lorafleet-launch" or "--" not in cmd:
                self.err(where, "the launcher must run lorafleet-launch ... -- mpirun")
                cmd = []
            else:
                sup = cmd[:cmd.index("--")]
                if "--max-restarts" in sup and str(
                        sup[sup.index("--max-restarts") + 1]) != str(cl.get("max_restarts")):
                    self.err(where, "lorafleet-launch --max-restarts, when given, must be "
                                    "cluster.max_restarts (one restart budget)")
                cmd = cmd[cmd.index("--") + 1:]
            if not cmd or cmd[0] != "mpirun":
                self.err(where, "the launcher must run mpirun")
            elif "-np" not in cmd or str(cmd[cmd.index("-np") + 1]) != str(cl.get("world_size")):
                self.err(where, "mpirun -np must be cluster.world_size")
            if "lorafleet-worker" not in cmd:
                self.err(where, "the launcher must start lorafleet-worker")
            else:
                wargs = cmd[cmd.index("lorafleet-worker") + 1:]
                if "--resume" not in wargs or wargs[wargs.index("--resume") + 1:][:1] != ["auto"]:
                    self.err(where, "lorafleet-worker must run with --resume auto")
                if "--launcher" in wargs:
                    self.err(where, "under mpirun the worker takes its rank from Open MPI: no --launcher")
            lenv = self.env(lc)
            pre = cmd[:cmd.index("lorafleet-worker")] if "lorafleet-worker" in cmd else []
            for var in ("LF_COORDINATOR", "LF_JOB_TOKEN_FILE"):
                if var not in lenv:
                    self.err(where, f"the launcher must set {var}")
                elif not any(pre[i] == "-x" and pre[i + 1] == var for i in range(len(pre) - 1)):
                    self.err(where, f"mpirun must forward {var} with -x")
            self.check_worker_pod(where, wo.get("template") or {}, cfg, env_mode=False)
            grace = ((wo.get("template") or {}).get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if grace <= cl.get("preempt_grace_seconds", 0):
                self.err(where, "worker terminationGracePeriodSeconds must exceed preempt_grace_seconds")

    def check_monitors(self, cfg):
        base = (cfg.get("worker") or {}).get("metrics_port_base")
        for where, pm in self.find("PodMonitor"):
            if pm.get("apiVersion") != "monitoring.coreos.com/v1":
                self.err(where, "PodMonitor must be monitoring.coreos.com/v1")
            self.check_crd_spec_keys(where, pm)
            spec = pm.get("spec") or {}
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            if sel != {"app.kubernetes.io/name": "lorafleet", "app.kubernetes.io/component": "worker"}:
                self.err(where, f"PodMonitor must select the worker pods, selects {sel}")
            eps = spec.get("podMetricsEndpoints") or []
            if not eps:
                self.err(where, "PodMonitor without podMetricsEndpoints")
            for ep in eps:
                self.check_endpoint(where, ep)
                if ep.get("port") != "metrics":
                    self.err(where, "podMetricsEndpoints must use the named port 'metrics'")
                # The address rewrite must produce metrics_port_base + rank.
                if isinstance(base, int):
                    for rank in (0, 1, 9, 10, 42, 99):
                        got = self.apply_relabel(ep.get("relabelings") or [], {
                            "__address__": f"10.0.0.7:{base}",
                            "__meta_kubernetes_pod_ip": "10.0.0.7",
                            "__meta_kubernetes_pod_annotation_batch_kubernetes_io_job_completion_index": str(rank),
                        })
                        if got.get("__address__") != f"10.0.0.7:{base + rank}":
                            self.err(where, f"relabelings scrape rank {rank} at {got.get('__address__')}, "
                                     f"but it serves on {base + rank} (worker.metrics_port_base + rank)")
                            break
                    got = self.apply_relabel(ep.get("relabelings") or [], {
                        "__address__": f"10.0.0.8:{base}", "__meta_kubernetes_pod_ip": "10.0.0.8",
                        "__meta_kubernetes_pod_label_training_kubeflow_org_replica_index": "1"})
                    if got.get("__address__") != f"10.0.0.8:{base + 1}":
                        self.err(where, "relabelings do not handle MPIJob worker pods (replica-index label)")
        if not self.find("PodMonitor"):
            self.err("deploy/k8s", "no PodMonitor")
        for where, sm in self.find("ServiceMonitor"):
            if sm.get("apiVersion") != "monitoring.coreos.com/v1":
                self.err(where, "ServiceMonitor must be monitoring.coreos.com/v1")
            self.check_crd_spec_keys(where, sm)
            spec = sm.get("spec") or {}
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            _, svc = self.one("Service", "lorafleet-coordinator")
            labels = ((svc or {}).get("metadata") or {}).get("labels") or {}
            if not sel or any(labels.get(k) != v for k, v in sel.items()):
                self.err(where, "ServiceMonitor selector does not match the coordinator Service")
            svc_ports = {p.get("name") for p in ((svc or {}).get("spec") or {}).get("ports") or []}
            for ep in spec.get("endpoints") or []:
                self.check_endpoint(where, ep)
                if ep.get("port") not in svc_ports:
                    self.err(where, f"endpoint port {ep.get('port')!r} is not a Service port")
            if not spec.get("endpoints"):
                self.err(where, "ServiceMonitor without endpoints")
        if not self.find("ServiceMonitor"):
            self.err("deploy/k8s", "no ServiceMonitor")

    def check_endpoint(self, where, ep):
        unknown = set(ep) - ENDPOINT_KEYS
        if unknown:
            self.err(where, f"unknown endpoint keys {sorted(unknown)}")
        for r in ep.get("relabelings") or []:
            if set(r) - RELABEL_KEYS:
                self.err(where, f"unknown relabeling keys {sorted(set(r) - RELABEL_KEYS)}")
            if r.get("action", "replace") not in RELABEL_ACTIONS:
                self.err(where, f"unknown relabeling action {r.get('action')!r}")
            try:
                re.compile(r.get("regex", "(.*)"))
            except re.error as e:
                self.err(where, f"relabeling regex {r.get('regex')!r}: {e}")

    @staticmethod
    def apply_relabel(rules, labels):
        """Prometheus 'replace' relabeling (anchored RE2 regex, ${n} expansion), enough to
        check the address rewrite."""
        labels = dict(labels)
        for r in rules:
            if r.get("action", "replace") != "replace":
                continue
            value = r.get("separator", ";").join(labels.get(s, "") for s in r.get("sourceLabels") or [])
            m = re.fullmatch(r.get("regex", "(.*)"), value)
            if not m:
                continue
            repl = re.sub(r"\$\{(\d+)\}|\$(\d+)",
                          lambda g: m.group(int(g.group(1) or g.group(2))) or "",
                          r.get("replacement", "$1"))
            if repl == "":
                labels.pop(r.get("targetLabel"), None)
            else:
                labels[r.get("targetLabel")] = repl
        return labels

    # ---------------------------------------------------------------- kustomize
    def check_kustomizations(self):
        referenced = set()
        for k in self.kustomizations:
            where = self.rel(k)
            try:
                kz = yaml.safe_load(open(k)) or {}
            except yaml.YAMLError as e:
                self.err(where, f"does not parse: {e}")
                continue
            if kz.get("kind") != "Kustomization" or not str(kz.get("apiVersion", "")).startswith(
                    "kustomize.config.k8s.io/"):
                self.err(where, "must be kind Kustomization, apiVersion kustomize.config.k8s.io/v1beta1")
            if kz.get("namespace"):
                self.err(where, "sets a namespace; the manifests are namespace-agnostic")
            known = {"apiVersion", "kind", "resources", "images", "configMapGenerator",
                     "secretGenerator", "labels", "commonLabels", "patches", "components",
                     "generatorOptions", "namePrefix", "nameSuffix", "replacements"}
            if set(kz) - known:
                self.err(where, f"unexpected keys {sorted(set(kz) - known)}")
            d = os.path.dirname(k)
            for res in kz.get("resources") or []:
                p = os.path.normpath(os.path.join(d, res))
                if os.path.isdir(p):
                    if not os.path.isfile(os.path.join(p, "kustomization.yaml")):
                        self.err(where, f"resource {res} is a directory without kustomization.yaml")
                elif os.path.isfile(p):
                    referenced.add(p)
                else:
                    self.err(where, f"resource {res} does not exist")
            for gen in kz.get("configMapGenerator") or []:
                for f in gen.get("files") or []:
                    f = f.split("=", 1)[-1]
                    if not os.path.isfile(os.path.join(d, f)):
                        self.err(where, f"configMapGenerator file {f} does not exist")
        for f in self.manifest_files:
            if os.path.normpath(f) not in referenced:
                self.err(self.rel(f), "is in no kustomization.yaml")
        if not os.path.isfile(os.path.join(self.k8s_dir, "kustomization.yaml")):
            self.err("deploy/k8s", "no top-level kustomization.yaml (kubectl apply -k deploy/k8s)")

    # ---------------------------------------------------------------- dashboard
    def registered_metrics(self):
        names = {}
        for src in METRIC_SOURCES:
            path = os.path.join(self.root, src)
            try:
                text = open(path).read()
            except OSError:
                self.err(src, "metrics source not found")
                continue
            for m in re.finditer(r'"(lorafleet_[a-z0-9_]+)"', text):
                names.setdefault(m.group(1), "gauge")
            for m in re.finditer(r'BuildHistogram\(\)\s*\.Name\("(lorafleet_[a-z0-9_]+)"\)', text):
                names[m.group(1)] = "histogram"
            for m in re.finditer(r'BuildCounter\(\)\s*\.Name\("(lorafleet_[a-z0-9_]+)"\)', text):
                names[m.group(1)] = "counter"
        for name in METRICS_BEING_ADDED:
            if name in names:
                self.notes.append(f"{name} is registered now: drop it from METRICS_BEING_ADDED")
        series = set()
        for name, typ in list(names.items()) + list(METRICS_BEING_ADDED.items()):
            if typ == "histogram":
                series |= {name + "_bucket", name + "_sum", name + "_count"}
            else:
                series.add(name)
        return series

    @staticmethod
    def promql_metric_names(expr):
        """Metric names in a PromQL expression: identifiers that are not functions, keywords,
        label names (inside {...} or by/without/on/ignoring (...)), durations or strings."""
        e = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'', '""', expr)   # strings
        e = re.sub(r"\{[^}]*\}", " ", e)                                   # label matchers
        e = re.sub(r"\[[^\]]*\]", " ", e)                                  # range / subquery
        e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
        e = re.sub(r"\$\{?\w+\}?", " ", e)                                 # Grafana variables
        names = set()
        for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", e):
            ident, call = m.group(1), m.group(2)
            if call or ident.lower() in PROMQL_KEYWORDS:
                continue
            names.add(ident)
        return names

    def check_dashboard(self):
        path = os.path.join(self.k8s_dir, "grafana", "lorafleet-dashboard.json")
        where = self.rel(path)
        try:
            dash = json.load(open(path))
        except (OSError, ValueError) as e:
            self.err(where, f"does not load: {e}")
            return
        known = self.registered_metrics()
        if not isinstance(dash.get("schemaVersion"), int) or dash["schemaVersion"] < 36:
            self.err(where, "schemaVersion must be a recent integer (39)")
        tvars = {v.get("name"): v for v in (dash.get("templating") or {}).get("list") or []}
        dsv = tvars.get("datasource") or {}
        if dsv.get("type") != "datasource" or dsv.get("query") != "prometheus":
            self.err(where, "needs a 'datasource' template variable of type prometheus")
        exprs = []
        for name, v in tvars.items():
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            if v.get("type") == "query" and isinstance(q, str):
                m = re.match(r"\s*label_values\(\s*(.*),\s*\w+\s*\)\s*$", q)
                exprs.append((f"variable {name}", m.group(1) if m else q))
        panels = list(dash.get("panels") or [])
        for p in list(panels):
            panels += p.get("panels") or []  # collapsed rows
        ids = set()
        for p in panels:
            if p.get("type") == "row":
                continue
            title = p.get("title") or f"panel {p.get('id')}"
            if p.get("id") in ids:
                self.err(where, f"panel '{title}': duplicate id {p.get('id')}")
            ids.add(p.get("id"))
            ds = p.get("datasource") or {}
            if ds.get("uid") != "${datasource}":
                self.err(where, f"panel '{title}' does not use the ${{datasource}} variable")
            targets = p.get("targets") or []
            if not targets:
                self.err(where, f"panel '{title}' has no targets")
            for t in targets:
                if not (t.get("expr") or "").strip():
                    self.err(where, f"panel '{title}' target {t.get('refId')} has no expr")
                    continue
                exprs.append((f"panel '{title}'", t["expr"]))
                if t["expr"].count("(") != t["expr"].count(")"):
                    self.err(where, f"panel '{title}': unbalanced parentheses in {t['expr']}")
        used = set()
        for what, expr in exprs:
            names = self.promql_metric_names(expr)
            if not names:
                self.err(where, f"{what}: no metric in {expr!r}")
            for n in sorted(names - known):
                self.err(where, f"{what}: metric {n} is not registered in {', '.join(METRIC_SOURCES)} "
                         "nor in METRICS_BEING_ADDED")
            used |= names
        self.n_dashboard = (len(ids), len(exprs), len(used))

    # ---------------------------------------------------------------- main
    def run(self):
        self.load()
        self.validate_builtins()
        cfg = self.job_config()
        self.check_coordinator(cfg)
        tmpl = self.check_indexed_job(cfg)
        self.check_jobset(cfg, tmpl)
        self.check_mpijob(cfg)
        self.check_monitors(cfg)
        self.check_kustomizations()
        self.n_dashboard = (0, 0, 0)
        self.check_dashboard()
        for n in self.notes:
            print(f"note: {n}")
        if self.errors:
            for e in self.errors:
                print(f"error: {e}")
            print(f"validate_k8s: {len(self.errors)} problem(s) in {self.k8s_dir}")
            return 1
        kinds = sorted({d.get("kind") for _, d in self.docs})
        print(f"validate_k8s: OK: {len(self.docs)} objects ({', '.join(kinds)}) in "
              f"{len(self.manifest_files)} files, {len(self.kustomizations)} kustomizations, "
              f"Kubernetes {self.version} strict schemas (kubernetes-validate "
              f"{kubernetes_validate.__version__}); dashboard: {self.n_dashboard[0]} panels, "
              f"{self.n_dashboard[1]} queries, {self.n_dashboard[2]} metric names all known")
        return 0


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=root, help="source tree (metrics sources, docs)")
    ap.add_argument("--k8s-dir", default=None, help="manifests folder (default ROOT/deploy/k8s)")
    ap.add_argument("--kubernetes-version", default=KUBERNETES_VERSION)
    a = ap.parse_args()
    k8s = os.path.abspath(a.k8s_dir or os.path.join(a.root, "deploy", "k8s"))
    return Checker(os.path.abspath(a.root), k8s, a.kubernetes_version).run()


if __name__ == "__main__":
    sys.exit(main())
