#!/usr/bin/env python3
"""Writes a Karpenter-benchmark-like batch (karpenter.md §13, scheduling_benchmark_test.go makeDiversePods)
and a catalog of fake instance types shaped like fake.InstanceTypes(n).

usage: make_bench.py N_PODS N_TYPES OUT_PREFIX   (writes OUT_PREFIX-pods.json and OUT_PREFIX-catalog.json)

Catalog: type i has cpu i+1, memory 2(i+1)Gi, pods 10(i+1), amd64/linux, kube-reserved 100m/10Mi, offerings
spot in test-zone-1/2 and on-demand in test-zone-1/2/3, all priced (i+1) x 0.3147483648 (0.1 per vCPU +
0.1 per GB), labels size=small|large (large iff cpu > 4 and memory > 8Gi), special=optional on large,
integer=<cpu>. Batch: one NodePool "default" (limits cpu 10000000, memory 10000000Gi, no requirements) and
N pending pods in five groups of N/5 (remainder generic): generic with my-label=<v>; zone spread maxSkew 1
with an independently drawn selector my-label=<w>; the same on hostname; zonal self-affinity on
my-affininity=<v>; app=nginx with required hostname anti-affinity. CPU in {100m,250m,500m,1000m,1500m},
memory in {100,256,512,1024,2048,4096}Mi. Python's random with seed 42 (values differ from the Go benchmark's).
"""
import json, random, sys

n_pods, n_types, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = random.Random(42)
VALUES = list("abcdefg")
def val(): return r.choice(VALUES)
def cpu(): return f"{r.choice([100, 250, 500, 1000, 1500])}m"
def mem(): return f"{r.choice([100, 256, 512, 1024, 2048, 4096])}Mi"

types = []
for i in range(n_types):
    c, m = i + 1, 2 * (i + 1)
    price = round((i + 1) * 0.3147483648, 10)
    large = c > 4 and m > 8
    labels = {"node.kubernetes.io/instance-type": f"fake-it-{i}", "kubernetes.io/arch": "amd64",
              "kubernetes.io/os": "linux", "size": "large" if large else "small", "integer": str(c)}
    if large:
        labels["special"] = "optional"
    offs = [{"zone": z, "capacityType": ct, "price": price, "available": True}
            for ct, zs in (("spot", ["test-zone-1", "test-zone-2"]), ("on-demand", ["test-zone-1", "test-zone-2", "test-zone-3"]))
            for z in zs]
    types.append({"name": f"fake-it-{i}", "labels": labels,
                  "capacity": {"cpu": str(c), "memory": f"{m}Gi", "pods": str(10 * c)},
                  "overhead": {"kubeReserved": {"cpu": "100m", "memory": "10Mi"}, "systemReserved": {}, "evictionThreshold": {}},
                  "offerings": offs})
catalog = {"schema": "stowage.dev/catalog/v1", "name": f"fake-{n_types}", "zones": ["test-zone-1", "test-zone-2", "test-zone-3"],
           "provenance": ["shaped like sigs.k8s.io/karpenter pkg/cloudprovider/fake InstanceTypes(n); prices are the fake provider's formula"],
           "instanceTypes": types}

items = [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
          "spec": {"limits": {"cpu": "10000000", "memory": "10000000Gi"},
                   "template": {"spec": {"requirements": [],
                                         "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}]
seq = 0
def pod(labels, extra):
    global seq
    seq += 1
    spec = {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu(), "memory": mem()}}}]}
    spec.update(extra)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{seq:05d}", "namespace": "default", "uid": f"00000000-0000-4000-8000-{seq:012d}", "labels": labels},
            "spec": spec, "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}

k = n_pods // 5
for _ in range(k):
    items.append(pod({"my-label": val()}, {}))
for key in ("topology.kubernetes.io/zone", "kubernetes.io/hostname"):
    for _ in range(k):
        lab = {"my-label": val()}
        items.append(pod(lab, {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                                              "labelSelector": {"matchLabels": {"my-label": val()}}}]}))
for _ in range(k):
    lab = {"my-affininity": val()}
    items.append(pod(lab, {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": dict(lab)}, "topologyKey": "topology.kubernetes.io/zone"}]}}}))
for _ in range(k):
    items.append(pod({"app": "nginx"}, {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "nginx"}}, "topologyKey": "kubernetes.io/hostname"}]}}}))
for _ in range(n_pods - 5 * k):
    items.append(pod({"my-label": val()}, {}))

with open(f"{prefix}-pods.json", "w") as f:
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f, indent=1)
    f.write("\n")
with open(f"{prefix}-catalog.json", "w") as f:
    json.dump(catalog, f, indent=1)
    f.write("\n")
