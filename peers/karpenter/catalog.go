package main

import (
	"fmt"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// Catalog is stowage's instance catalog (docs/formats.md §2, schema stowage.dev/catalog/v1).
type Catalog struct {
	Schema        string            `json:"schema"`
	Name          string            `json:"name"`
	Region        string            `json:"region"`
	Zones         []string          `json:"zones"`
	InstanceTypes []CatalogInstance `json:"instanceTypes"`
}

type CatalogInstance struct {
	Name      string              `json:"name"`
	Labels    map[string]string   `json:"labels"`
	Capacity  corev1.ResourceList `json:"capacity"`
	Overhead  CatalogOverhead     `json:"overhead"`
	Offerings []CatalogOffering   `json:"offerings"`
}

type CatalogOverhead struct {
	KubeReserved      corev1.ResourceList `json:"kubeReserved"`
	SystemReserved    corev1.ResourceList `json:"systemReserved"`
	EvictionThreshold corev1.ResourceList `json:"evictionThreshold"`
}

type CatalogOffering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	Available    *bool   `json:"available"`
	PriceSource  string  `json:"priceSource"`
}

// offeringInfo remembers what a cloudprovider.Offering came from (its price source).
type offeringInfo struct {
	zone, capacityType, priceSource string
}

// catalogTypes is the catalog turned into Karpenter instance types, plus what the plan needs back.
type catalogTypes struct {
	region        string
	types         []*cloudprovider.InstanceType
	labels        map[string]map[string]string // type name -> catalog labels
	offeringInfos map[*cloudprovider.Offering]offeringInfo
}

func loadCatalog(path string) (*Catalog, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Catalog
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		// Unknown fields (provenance, aws, ...) are fine: fall back to the lenient decoder.
		if err2 := yaml.Unmarshal(raw, &c); err2 != nil {
			return nil, fmt.Errorf("parsing catalog %s: %w", path, err2)
		}
	}
	if c.Schema != "" && c.Schema != "stowage.dev/catalog/v1" {
		warnf("catalog %s: schema %q, expected stowage.dev/catalog/v1; reading it anyway", path, c.Schema)
	}
	if len(c.InstanceTypes) == 0 {
		return nil, fmt.Errorf("catalog %s has no instanceTypes", path)
	}
	return &c, nil
}

// buildInstanceTypes maps every catalog entry to a *cloudprovider.InstanceType the way a cloud provider's
// GetInstanceTypes would hand it to the scheduler:
//   - Requirements: one `key In [value]` per catalog label, instance-type name, region (if known), and zone and
//     capacity type from the available offerings. Every label key that some type carries and another does not
//     becomes `key DoesNotExist` on the latter (what the AWS provider does for its label set).
//   - Every catalog label key is registered in karpv1.WellKnownLabels, as the AWS provider registers its
//     karpenter.k8s.aws/* labels in init(); otherwise pods selecting on them fail "does not have known values".
//   - Capacity as given (pods must be present), Overhead from the three overhead maps.
//   - Offerings: requirements capacity-type + zone, price, availability.
func buildInstanceTypes(c *Catalog) (*catalogTypes, error) {
	out := &catalogTypes{
		region:        c.Region,
		labels:        map[string]map[string]string{},
		offeringInfos: map[*cloudprovider.Offering]offeringInfo{},
	}
	allKeys := map[string]bool{}
	for _, it := range c.InstanceTypes {
		for k := range it.Labels {
			allKeys[k] = true
		}
	}
	for k := range allKeys {
		karpv1.WellKnownLabels.Insert(k)
	}
	seen := map[string]bool{}
	for _, ci := range c.InstanceTypes {
		if ci.Name == "" {
			return nil, fmt.Errorf("catalog: instance type without name")
		}
		if seen[ci.Name] {
			return nil, fmt.Errorf("catalog: duplicate instance type %s", ci.Name)
		}
		seen[ci.Name] = true
		if _, ok := ci.Capacity[corev1.ResourcePods]; !ok {
			return nil, fmt.Errorf("catalog: instance type %s has no capacity.pods (Karpenter would fit nothing on it)", ci.Name)
		}
		reqs := scheduling.NewRequirements()
		labels := map[string]string{}
		for k, v := range ci.Labels {
			labels[k] = v
			reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpIn, v))
		}
		if lt, ok := labels[corev1.LabelInstanceTypeStable]; ok && lt != ci.Name {
			warnf("catalog: %s carries label %s=%s; using the type name", ci.Name, corev1.LabelInstanceTypeStable, lt)
		}
		labels[corev1.LabelInstanceTypeStable] = ci.Name
		reqs.Add(scheduling.NewRequirement(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, ci.Name))
		for k := range allKeys {
			if _, ok := ci.Labels[k]; !ok && k != corev1.LabelInstanceTypeStable {
				reqs.Add(scheduling.NewRequirement(k, corev1.NodeSelectorOpDoesNotExist))
			}
		}
		if c.Region != "" {
			reqs.Add(scheduling.NewRequirement(corev1.LabelTopologyRegion, corev1.NodeSelectorOpIn, c.Region))
		}
		var offerings cloudprovider.Offerings
		zones, capTypes := map[string]bool{}, map[string]bool{}
		allZones, allCapTypes := map[string]bool{}, map[string]bool{}
		for _, co := range ci.Offerings {
			if co.Zone == "" || co.CapacityType == "" {
				return nil, fmt.Errorf("catalog: %s has an offering without zone or capacityType", ci.Name)
			}
			if co.CapacityType == karpv1.CapacityTypeReserved {
				warnf("catalog: %s: reserved offering in %s skipped (no reservation IDs in the catalog format)", ci.Name, co.Zone)
				continue
			}
			avail := co.Available == nil || *co.Available
			of := &cloudprovider.Offering{
				Requirements: scheduling.NewRequirements(
					scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, co.CapacityType),
					scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, co.Zone),
				),
				Price:     co.Price,
				Available: avail,
			}
			src := co.PriceSource
			if src == "" {
				src = "catalog"
			}
			out.offeringInfos[of] = offeringInfo{zone: co.Zone, capacityType: co.CapacityType, priceSource: src}
			offerings = append(offerings, of)
			allZones[co.Zone], allCapTypes[co.CapacityType] = true, true
			if avail {
				zones[co.Zone], capTypes[co.CapacityType] = true, true
			}
		}
		// Like the AWS provider, the zone and capacity-type requirements list what can be launched; a type with
		// no available offering keeps the full lists (it can never be launched anyway).
		if len(zones) == 0 {
			zones, capTypes = allZones, allCapTypes
		}
		reqs.Add(scheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, sortedKeys(zones)...))
		reqs.Add(scheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, sortedKeys(capTypes)...))
		it := &cloudprovider.InstanceType{
			Name:         ci.Name,
			Requirements: reqs,
			Offerings:    offerings,
			Capacity:     ci.Capacity.DeepCopy(),
			Overhead: &cloudprovider.InstanceTypeOverhead{
				KubeReserved:      nonNil(ci.Overhead.KubeReserved),
				SystemReserved:    nonNil(ci.Overhead.SystemReserved),
				EvictionThreshold: nonNil(ci.Overhead.EvictionThreshold),
			},
		}
		out.types = append(out.types, it)
		out.labels[ci.Name] = labels
	}
	return out, nil
}

func nonNil(r corev1.ResourceList) corev1.ResourceList {
	if r == nil {
		return corev1.ResourceList{}
	}
	return r.DeepCopy()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
