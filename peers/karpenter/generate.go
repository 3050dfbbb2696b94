package main

// generate-benchmark: writes the batch of Karpenter's scheduling benchmark
// (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go,
// BenchmarkScheduling<N> → makeDiversePods(N)) as a stowage workload: one NodePool and N pending pods.
//
// Why a reimplementation and not the benchmark's own functions: makeDiversePods and its helpers live in a
// _test.go file behind the test_performance build tag, so they cannot be imported. Karpenter's test.Pod
// (pkg/test) could be, but that package also pulls in envtest, ginkgo and go-randomdata (not in this
// module's go.sum) and names every object with a time-seeded random name. So the shapes are rebuilt field by
// field with the same random source, drawing in the same order:
//
//   - one rand.New(rand.NewSource(42)) per generated file. The benchmark has one package-level source shared
//     by all benchmarks; a fresh source is what BenchmarkScheduling<N> sees when it runs alone
//     (go test -bench=Scheduling<N>$), which makes each size reproducible on its own.
//   - makeDiversePods(n): ⌊n/5⌋ generic, ⌊n/5⌋ zone spread, ⌊n/5⌋ hostname spread, ⌊n/5⌋ zonal self-affinity,
//     ⌊n/5⌋ hostname anti-affinity, then the remainder generic.
//   - per pod, Go evaluates the PodOptions literal left to right: labels (randomLabels / randomAffinityLabels),
//     then for spread pods the selector's randomLabels, then randomCPU, then randomMemory. Anti-affinity pods
//     draw only CPU and memory.
//   - randomLabelValue = r.Intn(7) over a..g; randomCPU = r.Intn(5) over 100,250,500,1000,1500 m;
//     randomMemory = r.Intn(6) over 100,256,512,1024,2048,4096 Mi.
//
// What test.Pod adds and is kept: namespace "default", the label testing/cluster=unspecified on every pod (it
// is in no selector, so it changes nothing, but the pods are the benchmark's), one container with image
// public.ecr.aws/eks-distro/kubernetes/pause:3.2 and requests only, a fresh UID per pod. What is not kept:
// the random names (here pod-00001... in creation order), creationTimestamp and an empty pod-level
// resources block (no semantics).
//
// The NodePool is setupScheduler's test.NodePool: limits cpu 10000000 and memory 10000000Gi, no
// requirements, taints or weight, and test.TemplateObjectMeta's template label testing/cluster=unspecified.
// One deliberate difference: test.NodePool references the test provider's TestNodeClass; here the NodePool
// references an EC2NodeClass "default" that the file also holds (AL2023, no kubelet settings). stowage models
// only EC2NodeClasses (its loader wants the referenced EC2NodeClass, and new nodes carry the label
// karpenter.k8s.aws/ec2nodeclass), while the peer would label Karpenter's nodes
// karpenter.test.sh/testnodeclass, and the checker would reject every Karpenter node for that label alone.
// The node class changes no capacity here (the fake types carry no AWS facts to recompute) and no pod
// selects its label, so scheduling is the benchmark's. The instance types are
// fake.InstanceTypes(400) = `stowage catalog generate --karpenter-benchmark 400`. The benchmark also sets
// NumConcurrentReconciles(5): run the peer with --concurrency 5 on these files.

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
)

const (
	benchZone     = "topology.kubernetes.io/zone"
	benchHostname = "kubernetes.io/hostname"
	benchImage    = "public.ecr.aws/eks-distro/kubernetes/pause:3.2"
)

type benchGen struct {
	r    *rand.Rand
	seq  int
	pods []any
}

func (g *benchGen) labelValue() string {
	values := []string{"a", "b", "c", "d", "e", "f", "g"}
	return values[g.r.Intn(len(values))]
}

func (g *benchGen) memory() string {
	mem := []int{100, 256, 512, 1024, 2048, 4096}
	return fmt.Sprintf("%dMi", mem[g.r.Intn(len(mem))])
}

func (g *benchGen) cpu() string {
	cpu := []int{100, 250, 500, 1000, 1500}
	return fmt.Sprintf("%dm", cpu[g.r.Intn(len(cpu))])
}

// pod builds one pod. cpu and memory are drawn by the caller, in the benchmark's order.
func (g *benchGen) pod(labels map[string]string, spec map[string]any, cpu, memory string) {
	g.seq++
	all := map[string]string{"testing/cluster": "unspecified"}
	for k, v := range labels {
		all[k] = v
	}
	spec["containers"] = []any{map[string]any{
		"name":      "main",
		"image":     benchImage,
		"resources": map[string]any{"requests": map[string]any{"cpu": cpu, "memory": memory}},
	}}
	g.pods = append(g.pods, map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"name":      fmt.Sprintf("pod-%05d", g.seq),
			"namespace": "default",
			"uid":       fmt.Sprintf("00000000-0000-4000-8000-%012d", g.seq),
			"labels":    all,
		},
		"spec": spec,
	})
}

func (g *benchGen) generic(count int) {
	for i := 0; i < count; i++ {
		labels := map[string]string{"my-label": g.labelValue()}
		cpu := g.cpu()
		mem := g.memory()
		g.pod(labels, map[string]any{}, cpu, mem)
	}
}

func (g *benchGen) topologySpread(count int, key string) {
	for i := 0; i < count; i++ {
		labels := map[string]string{"my-label": g.labelValue()}
		selector := map[string]string{"my-label": g.labelValue()}
		cpu := g.cpu()
		mem := g.memory()
		g.pod(labels, map[string]any{"topologySpreadConstraints": []any{map[string]any{
			"maxSkew":           1,
			"topologyKey":       key,
			"whenUnsatisfiable": "DoNotSchedule",
			"labelSelector":     map[string]any{"matchLabels": selector},
		}}}, cpu, mem)
	}
}

func (g *benchGen) podAffinity(count int, key string) {
	for i := 0; i < count; i++ {
		// The benchmark's own spelling of the key ("my-affininity") is kept.
		labels := map[string]string{"my-affininity": g.labelValue()}
		cpu := g.cpu()
		mem := g.memory()
		g.pod(labels, map[string]any{"affinity": map[string]any{"podAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
				"labelSelector": map[string]any{"matchLabels": labels},
				"topologyKey":   key,
			}},
		}}}, cpu, mem)
	}
}

func (g *benchGen) podAntiAffinity(count int, key string) {
	labels := map[string]string{"app": "nginx"}
	for i := 0; i < count; i++ {
		cpu := g.cpu()
		mem := g.memory()
		g.pod(labels, map[string]any{"affinity": map[string]any{"podAntiAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
				"labelSelector": map[string]any{"matchLabels": labels},
				"topologyKey":   key,
			}},
		}}}, cpu, mem)
	}
}

// diversePods is makeDiversePods(count).
func diversePods(count int, seed int64) []any {
	g := &benchGen{r: rand.New(rand.NewSource(seed))} //nolint:gosec // the benchmark's generator, on purpose
	n := count / 5
	g.generic(n)
	g.topologySpread(n, benchZone)
	g.topologySpread(n, benchHostname)
	g.podAffinity(n, benchZone)
	g.podAntiAffinity(n, benchHostname)
	g.generic(count - len(g.pods))
	return g.pods
}

func benchNodePool() map[string]any {
	return map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": "default", "labels": map[string]string{"testing/cluster": "unspecified"}},
		"spec": map[string]any{
			"limits": map[string]any{"cpu": "10000000", "memory": "10000000Gi"},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"testing/cluster": "unspecified"}},
				"spec": map[string]any{
					"requirements": []any{},
					"nodeClassRef": map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
				},
			},
		},
	}
}

func benchNodeClass() map[string]any {
	return map[string]any{
		"apiVersion": "karpenter.k8s.aws/v1",
		"kind":       "EC2NodeClass",
		"metadata":   map[string]any{"name": "default"},
		"spec": map[string]any{
			"role":                       "KarpenterNodeRole-benchmark",
			"amiSelectorTerms":           []any{map[string]any{"alias": "al2023@latest"}},
			"subnetSelectorTerms":        []any{map[string]any{"tags": map[string]string{"karpenter.sh/discovery": "benchmark"}}},
			"securityGroupSelectorTerms": []any{map[string]any{"tags": map[string]string{"karpenter.sh/discovery": "benchmark"}}},
		},
	}
}

// benchmarkList is the whole file: a v1 List with the EC2NodeClass and the NodePool first, then the pods
// in creation order.
func benchmarkList(pods int, seed int64) ([]byte, error) {
	items := append([]any{benchNodeClass(), benchNodePool()}, diversePods(pods, seed)...)
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
	// One item per line keeps the file diffable before compression; encoding/json sorts map keys, so the
	// bytes depend only on (pods, seed).
	var buf bytes.Buffer
	buf.WriteString("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n")
	for i, it := range list["items"].([]any) {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
		if i+1 < len(items) {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]}\n")
	return buf.Bytes(), nil
}

func runGenerateBenchmark(args []string) error {
	fs := flag.NewFlagSet("generate-benchmark", flag.ContinueOnError)
	pods := fs.Int("pods", 0, "number of pods (makeDiversePods(N)); required")
	out := fs.String("out", "", "output file; a name ending in .gz is gzip-compressed; default stdout")
	seed := fs.Int64("seed", 42, "math/rand seed (the benchmark's is 42)")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: karpenter-peer generate-benchmark --pods N [--out FILE[.gz]] [--seed 42]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *pods < 1 {
		return errors.New("--pods N (N >= 1) is required")
	}
	data, err := benchmarkList(*pods, *seed)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	if strings.HasSuffix(*out, ".gz") {
		var z bytes.Buffer
		// No name and a zero modification time in the header: the same input gives the same bytes.
		w, err := gzip.NewWriterLevel(&z, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		data = z.Bytes()
	}
	return os.WriteFile(*out, data, 0o644)
}
