package main

import (
	"fmt"
	"math/rand"
	"sort"

	"github.com/samber/lo"

	corev1 "k8s.io/api/core/v1"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	karpsched "sigs.k8s.io/karpenter/pkg/scheduling"
)

// Plan is stowage's plan (docs/formats.md §3, schema stowage.dev/plan/v1).
type Plan struct {
	Schema          string             `json:"schema"`
	Solver          Solver             `json:"solver"`
	CostPerHour     float64            `json:"costPerHour"`
	SyntheticPrices bool               `json:"syntheticPrices"`
	NewNodes        []NewNode          `json:"newNodes"`
	ExistingNodes   []ExistingNodePlan `json:"existingNodes"`
	Placements      []Placement        `json:"placements"`
	Unschedulable   []Unschedulable    `json:"unschedulable"`
	Totals          Totals             `json:"totals"`
}

type Solver struct {
	Name      string   `json:"name"`
	Status    string   `json:"status"`
	Detail    string   `json:"detail,omitempty"`
	TimeMs    float64  `json:"timeMs"`
	Objective *float64 `json:"objective"`
	Phases    []Phase  `json:"phases"`
}

type Phase struct {
	Name   string  `json:"name"`
	TimeMs float64 `json:"timeMs"`
}

type NewNode struct {
	Name         string            `json:"name"`
	NodePool     string            `json:"nodePool"`
	InstanceType string            `json:"instanceType"`
	Zone         string            `json:"zone"`
	CapacityType string            `json:"capacityType"`
	PricePerHour float64           `json:"pricePerHour"`
	PriceSource  string            `json:"priceSource"`
	Labels       map[string]string `json:"labels"`
	Taints       []corev1.Taint    `json:"taints"`
	Pods         []string          `json:"pods"`
}

type ExistingNodePlan struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

type Placement struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

type Unschedulable struct {
	Pod    string `json:"pod"`
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
}

type Totals struct {
	NewNodes          int     `json:"newNodes"`
	PodsPlaced        int     `json:"podsPlaced"`
	PodsUnschedulable int     `json:"podsUnschedulable"`
	CostPerHour       float64 `json:"costPerHour"`
}

// simulationKeys are added to NodeClaimTemplates for DaemonSet simulation only and never reach a NodeClaim.
var simulationKeys = map[string]bool{karpv1.NodeRegisteredLabelKey: true, karpv1.NodeInitializedLabelKey: true}

// resolveLaunch turns a scheduler NodeClaim into one concrete node, the way Karpenter would create it
// (NodeClaimTemplate.ToNodeClaim) and the KWOK provider would launch it (kwok/cloudprovider toNode):
//   - KWOK walks the NodeClaim's instance-type values (alphabetical, as Requirements.NodeSelectorRequirements
//     writes them) and keeps the type whose cheapest available offering compatible with the NodeClaim's
//     requirements is strictly cheaper than the best so far; among offerings of equal price it samples at
//     random (lo.Sample), here with `rng` over those offerings sorted by zone, then capacity type.
//   - ToNodeClaim's extra requirements (instance-type In [options], capacity-type In [types of their compatible
//     offerings]) never exclude an offering that the NodeClaim's own requirements allow, and its price
//     ordering only matters for the cut to MaxInstanceTypes that TruncateInstanceTypes already made, so the
//     NodeClaim's requirements and InstanceTypeOptions are used directly (calling ToNodeClaim cost ~2-7 ms
//     per NodeClaim with 400 types, more than the whole Solve for large batches).
//   - Labels as KWOK's addInstanceLabels: NodeClaim labels (template labels, karpenter.sh/nodepool, the
//     nodeclass label, custom labels resolved from the requirements), the NodeClaim's single-valued In
//     requirements, the instance type's labels, the offering's zone and capacity type, plus the region and
//     kubernetes.io/hostname = the node name.
func resolveLaunch(nc *scheduling.NodeClaim, ct *catalogTypes, np *karpv1.NodePool, name string, rng *rand.Rand) (*NewNode, error) {
	reqs := karpsched.NewRequirements(lo.Filter(nc.Requirements.Values(), func(r *karpsched.Requirement, _ int) bool {
		return !simulationKeys[r.Key]
	})...)
	zoneReq, ctReq := reqs.Get(corev1.LabelTopologyZone), reqs.Get(karpv1.CapacityTypeLabelKey)
	its := append(cloudprovider.InstanceTypes{}, nc.InstanceTypeOptions...)
	sort.SliceStable(its, func(i, j int) bool { return its[i].Name < its[j].Name })
	var bestIT *cloudprovider.InstanceType
	var bestOf *cloudprovider.Offering
	for _, it := range its {
		if !reqs.Get(corev1.LabelInstanceTypeStable).Has(it.Name) {
			continue
		}
		var ofs []*cloudprovider.Offering
		for _, of := range it.Offerings {
			// Offerings carry exactly zone + capacity type: this is Offerings.Available().Compatible(reqs).
			if of.Available && zoneReq.Has(of.Zone()) && ctReq.Has(of.CapacityType()) {
				ofs = append(ofs, of)
			}
		}
		if len(ofs) == 0 {
			continue
		}
		sort.SliceStable(ofs, func(i, j int) bool {
			if ofs[i].Price != ofs[j].Price {
				return ofs[i].Price < ofs[j].Price
			}
			if ofs[i].Zone() != ofs[j].Zone() {
				return ofs[i].Zone() < ofs[j].Zone()
			}
			return ofs[i].CapacityType() < ofs[j].CapacityType()
		})
		if bestOf == nil || ofs[0].Price < bestOf.Price {
			cheapest := lo.Filter(ofs, func(of *cloudprovider.Offering, _ int) bool { return of.Price == ofs[0].Price })
			bestIT, bestOf = it, cheapest[rng.Intn(len(cheapest))]
		}
	}
	if bestOf == nil {
		return nil, fmt.Errorf("none of %d instance type(s) has an available offering compatible with %s", len(its), reqs.String())
	}
	info := ct.offeringInfos[bestOf]

	labels := map[string]string{}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	// ToNodeClaim labels custom keys (not well-known, not restricted) with Requirement.Any(): an arbitrary member
	// of an In set (map order) or a random integer for Exists/NotIn. Here: a member drawn with `rng` from the
	// sorted In set, or a random non-negative integer the requirement admits (Gt/Lt bounds are honoured by
	// drawing again; after 100 draws the key is left out with a warning).
	for key, r := range reqs {
		if karpv1.WellKnownLabels.Has(key) || karpv1.RestrictedLabels.Has(key) {
			continue
		}
		if r.Operator() == corev1.NodeSelectorOpIn && r.Len() > 0 {
			vals := r.Values()
			sort.Strings(vals)
			labels[key] = vals[rng.Intn(len(vals))]
		} else if r.Operator() != corev1.NodeSelectorOpDoesNotExist {
			found := false
			for try := 0; try < 100 && !found; try++ {
				if v := fmt.Sprint(rng.Int63()); r.Has(v) {
					labels[key], found = v, true
				}
			}
			if !found {
				warnf("%s: label %s is open (%s) in its NodeClaim and no random integer drawn satisfies it; left out", name, key, r.Operator())
			}
		}
	}
	// KWOK: every single-valued In requirement becomes a label.
	for key, r := range reqs {
		if r.Operator() == corev1.NodeSelectorOpIn && r.Len() == 1 {
			labels[key] = r.Values()[0]
		}
	}
	for k, v := range ct.labels[bestIT.Name] {
		labels[k] = v
	}
	labels[corev1.LabelInstanceTypeStable] = bestIT.Name
	labels[corev1.LabelTopologyZone] = bestOf.Zone()
	labels[karpv1.CapacityTypeLabelKey] = bestOf.CapacityType()
	if ct.region != "" {
		labels[corev1.LabelTopologyRegion] = ct.region
	}
	labels[corev1.LabelHostname] = name

	var taints []corev1.Taint
	if np != nil {
		taints = append(taints, np.Spec.Template.Spec.Taints...)
	}
	if taints == nil {
		taints = []corev1.Taint{}
	}
	src := info.priceSource
	if src == "" {
		src = "catalog"
	}
	return &NewNode{
		Name:         name,
		NodePool:     nc.NodePoolName,
		InstanceType: bestIT.Name,
		Zone:         bestOf.Zone(),
		CapacityType: bestOf.CapacityType(),
		PricePerHour: bestOf.Price,
		PriceSource:  src,
		Labels:       labels,
		Taints:       taints,
		Pods:         []string{},
	}, nil
}
