#!/usr/bin/env python3
"""Writes catalog-aws-small.json: a small stowage catalog (stowage.dev/catalog/v1) for the Karpenter peer.

Hardware and on-demand prices come from shared/data/aws (instance-types.json, ondemand-prices.json).
capacity and overhead are chosen so that capacity - overhead equals Karpenter's AL2023 allocatable
(field karpenter_al2023_allocatable), using the formulas in shared/data/aws/README.md.
Spot prices are synthetic: 0.35 x on-demand, marked priceSource synthetic.
usage: make_catalog.py SHARED_DATA_AWS_DIR > catalog-aws-small.json
"""
import json, math, sys

TYPES = ["c5.large", "c5.xlarge", "c6g.medium", "c6g.large", "m5.large", "m5.xlarge", "r5.large"]
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
REGION = "us-east-1"

def kube_reserved_cpu_m(vcpu):
    m = vcpu * 1000
    bands = [(1000, 0.06), (1000, 0.01), (2000, 0.005), (float("inf"), 0.0025)]
    total, left = 0, m
    for size, frac in bands:
        take = min(left, size)
        if take <= 0:
            break
        total += int(take * frac)
        left -= take
    return total

def main():
    d = sys.argv[1]
    its = {}
    with open(f"{d}/instance-types.json") as f:
        for rec in json.load(f):
            its[rec["name"]] = rec
    prices = json.load(open(f"{d}/ondemand-prices.json"))[REGION]
    out = []
    for name in TYPES:
        r = its[name]
        alloc = r["karpenter_al2023_allocatable"]
        pods = alloc["pods"]
        mem = r["memory_mib"] - (64 if r["architecture"] == "arm64" else 0)
        mem -= math.ceil(mem * 0.075)
        kr_mem = 11 * pods + 255
        kr_cpu = kube_reserved_cpu_m(r["vcpu"])
        assert mem - kr_mem - 100 == alloc["memory_mib"], name
        assert r["vcpu"] * 1000 - kr_cpu == alloc["cpu_millicores"], name
        od = prices[name]
        offerings = []
        for z in ZONES:
            offerings.append({"zone": z, "capacityType": "on-demand", "price": od, "available": True})
            offerings.append({"zone": z, "capacityType": "spot", "price": round(od * 0.35, 6),
                              "available": True, "priceSource": "synthetic"})
        out.append({
            "name": name,
            "labels": {
                "node.kubernetes.io/instance-type": name,
                "kubernetes.io/arch": r["architecture"],
                "kubernetes.io/os": "linux",
                "karpenter.k8s.aws/instance-category": r["category"],
                "karpenter.k8s.aws/instance-family": r["family"],
                "karpenter.k8s.aws/instance-generation": str(r["generation"]),
                "karpenter.k8s.aws/instance-size": r["size"],
                "karpenter.k8s.aws/instance-cpu": str(r["vcpu"]),
                "karpenter.k8s.aws/instance-memory": str(r["memory_mib"]),
                "karpenter.k8s.aws/instance-hypervisor": r["hypervisor"],
            },
            "capacity": {"cpu": str(r["vcpu"]), "memory": f"{mem}Mi", "ephemeral-storage": "20Gi", "pods": str(pods)},
            "overhead": {
                "kubeReserved": {"cpu": f"{kr_cpu}m", "memory": f"{kr_mem}Mi", "ephemeral-storage": "1Gi"},
                "systemReserved": {},
                "evictionThreshold": {"memory": "100Mi", "ephemeral-storage": "2Gi"},
            },
            "offerings": offerings,
        })
    cat = {
        "schema": "stowage.dev/catalog/v1",
        "name": "aws-us-east-1-small",
        "region": REGION,
        "zones": ZONES,
        "provenance": [
            "hardware, allocatable and on-demand prices (us-east-1, USD/h): shared/data/aws (extracted from aws/karpenter-provider-aws 1d92708)",
            "capacity/overhead: AL2023 defaults, capacity - overhead = karpenter_al2023_allocatable",
            "spot prices: synthetic, 0.35 x on-demand",
        ],
        "instanceTypes": out,
    }
    json.dump(cat, sys.stdout, indent=1)
    sys.stdout.write("\n")

main()
