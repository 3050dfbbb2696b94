// karpenter-peer runs Karpenter's own provisioning scheduler (sigs.k8s.io/karpenter, used as a library) on a
// stowage batch and catalog and writes the result as a stowage plan (docs/formats.md §3).
//
//	karpenter-peer [--catalog CATALOG.json] [--out PLAN.json] [--concurrency N]
//	               [--preference-policy Respect|Ignore] WORKLOAD_FILE...
//	karpenter-peer generate-benchmark --pods N [--out FILE[.gz]] [--seed 42]   (generate.go)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/awslabs/operatorpkg/status"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning"
	"sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	karpsched "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/daemonset"
	nodepoolutils "sigs.k8s.io/karpenter/pkg/utils/nodepool"
	podutils "sigs.k8s.io/karpenter/pkg/utils/pod"
)

const (
	karpenterModule  = "sigs.k8s.io/karpenter"
	annBindCompleted = "pv.kubernetes.io/bind-completed"
)

func warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "karpenter-peer: "+format+"\n", args...)
}

type cliOptions struct {
	catalog     string
	out         string
	concurrency int
	preference  string
	seed        int64
	files       []string
}

func parseArgs(args []string) (*cliOptions, error) {
	o := &cliOptions{}
	fs := flag.NewFlagSet("karpenter-peer", flag.ContinueOnError)
	fs.StringVar(&o.catalog, "catalog", "", "stowage catalog (stowage.dev/catalog/v1, YAML or JSON); required")
	fs.StringVar(&o.out, "out", "", "write the plan here instead of stdout")
	fs.IntVar(&o.concurrency, "concurrency", 1, "scheduler NumConcurrentReconciles (Karpenter: ceil(CPU_REQUESTS/1000), default 1)")
	fs.StringVar(&o.preference, "preference-policy", "Respect", "Respect or Ignore (Karpenter's PREFERENCE_POLICY)")
	fs.Int64Var(&o.seed, "seed", 1, "seed of the random choices Karpenter and its KWOK provider make at launch (the offering among equal-price ones, a custom label's value); the same seed gives the same choices")
	fs.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: karpenter-peer [--catalog CATALOG.json] [--out PLAN.json] [--concurrency N] [--preference-policy Respect|Ignore] [--seed N] WORKLOAD_FILE...")
		fs.PrintDefaults()
	}
	// Flags may come before or after the files.
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			o.files = append(o.files, args[0])
			args = args[1:]
		}
	}
	if o.catalog == "" {
		return nil, errors.New("--catalog is required: karpenter-peer has no built-in instance types (pass stowage's catalog JSON/YAML)")
	}
	if len(o.files) == 0 {
		return nil, errors.New("no WORKLOAD_FILE given")
	}
	if o.concurrency < 1 {
		return nil, errors.New("--concurrency must be >= 1")
	}
	switch o.preference {
	case "Respect", "Ignore":
	default:
		return nil, fmt.Errorf("--preference-policy must be Respect or Ignore, not %q", o.preference)
	}
	return o, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "generate-benchmark" {
		if err := runGenerateBenchmark(os.Args[2:]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				os.Exit(0)
			}
			warnf("generate-benchmark: %v", err)
			os.Exit(2)
		}
		return
	}
	o, err := parseArgs(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		warnf("%v", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		warnf("error: %v", err)
		os.Exit(1)
	}
}

func karpenterVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == karpenterModule {
				return d.Version
			}
		}
	}
	return "unknown"
}

// stubCloudProvider satisfies cloudprovider.CloudProvider for state.Cluster (which only uses it in Synced, never
// called here) and for the Provisioner we build to reuse its pod validation.
type stubCloudProvider struct{ its []*cloudprovider.InstanceType }

func (stubCloudProvider) Create(context.Context, *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	return nil, errors.New("not supported")
}
func (stubCloudProvider) Delete(context.Context, *karpv1.NodeClaim) error { return nil }
func (stubCloudProvider) Get(context.Context, string) (*karpv1.NodeClaim, error) {
	return nil, cloudprovider.NewNodeClaimNotFoundError(errors.New("not supported"))
}
func (stubCloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) { return nil, nil }
func (s stubCloudProvider) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return s.its, nil
}
func (stubCloudProvider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}
func (stubCloudProvider) RepairPolicies() []cloudprovider.RepairPolicy { return nil }
func (stubCloudProvider) Name() string                                 { return "stowage-catalog" }
func (stubCloudProvider) GetSupportedNodeClasses() []status.Object     { return nil }

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func run(o *cliOptions) error {
	tStart := time.Now()
	// Karpenter logs through controller-runtime's logger: send level-0 messages to stderr.
	ctrllog.SetLogger(stderrLogger())
	ctx := injection.WithControllerName(context.Background(), "provisioner")
	ctx = ctrllog.IntoContext(ctx, ctrllog.Log)
	prefPolicy := options.PreferencePolicyRespect
	if o.preference == "Ignore" {
		prefPolicy = options.PreferencePolicyIgnore
	}
	ctx = options.ToContext(ctx, &options.Options{
		CPURequests:       int64(o.concurrency) * 1000,
		PreferencePolicy:  prefPolicy,
		MinValuesPolicy:   options.MinValuesPolicyStrict,
		IgnoreDRARequests: true,
		BatchMaxDuration:  10 * time.Second,
		BatchIdleDuration: time.Second,
		FeatureGates:      options.FeatureGates{ReservedCapacity: true},
	})

	cat, err := loadCatalog(o.catalog)
	if err != nil {
		return err
	}
	ct, err := buildInstanceTypes(cat)
	if err != nil {
		return err
	}
	batch, err := loadWorkloads(o.files)
	if err != nil {
		return err
	}
	tLoaded := time.Now()

	// ---- objects for the fake API server -------------------------------------------------------------
	nodeNames := map[string]bool{}
	for _, n := range batch.Nodes {
		nodeNames[n.Name] = true
		if n.Labels[karpv1.NodePoolLabelKey] != "" && n.Spec.ProviderID == "" {
			// state.Cluster silently drops a managed node without a providerID.
			n.Spec.ProviderID = "stowage:///" + n.Name
			warnf("node %s is labelled %s but has no spec.providerID; using %s", n.Name, karpv1.NodePoolLabelKey, n.Spec.ProviderID)
		}
	}
	for _, pvc := range batch.PVCs {
		// Karpenter (like kube-scheduler) treats a PVC with a volumeName but without the PV controller's
		// bind-completed annotation as unbound and ignores its pods. A recorded batch that says the claim is Bound
		// lost the annotation somewhere; restore it as the PV controller would have set it.
		if pvc.Spec.VolumeName != "" && pvc.Status.Phase == corev1.ClaimBound {
			if _, ok := pvc.Annotations[annBindCompleted]; !ok {
				if pvc.Annotations == nil {
					pvc.Annotations = map[string]string{}
				}
				pvc.Annotations[annBindCompleted] = "yes"
				warnf("pvc %s/%s is Bound to %s but lacks annotation %s; added it (the PV controller sets it on binding)", pvc.Namespace, pvc.Name, pvc.Spec.VolumeName, annBindCompleted)
			}
		}
	}
	uids := map[types.UID]string{}
	var pending, bound []*corev1.Pod
	var unsched []Unschedulable
	for _, p := range batch.Pods {
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if p.UID == "" || uids[p.UID] != "" {
			// The scheduler caches per pod UID: every pod needs a distinct one.
			p.UID = types.UID("stowage-peer-" + p.Namespace + "-" + p.Name)
		}
		uids[p.UID] = podKey(p)
		switch {
		case p.Spec.NodeName != "":
			if !nodeNames[p.Spec.NodeName] {
				warnf("pod %s is bound to unknown node %s; ignored", podKey(p), p.Spec.NodeName)
				continue
			}
			bound = append(bound, p)
		case podutils.IsOwnedByDaemonSet(p) || podutils.IsOwnedByNode(p):
			unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter",
				Reason: "not provisionable: DaemonSet/static pods are not scheduled by Karpenter's provisioner (DaemonSets count as per-node overhead)"})
		case podutils.IsTerminal(p) || podutils.IsTerminating(p):
			unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter", Reason: "not provisionable: pod is terminal or terminating"})
		default:
			pending = append(pending, p)
		}
	}
	nsSeen := map[string]bool{}
	for _, ns := range batch.Namespaces {
		nsSeen[ns.Name] = true
	}
	for _, p := range batch.Pods {
		if !nsSeen[p.Namespace] {
			nsSeen[p.Namespace] = true
			batch.Namespaces = append(batch.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}})
		}
	}
	var objs []client.Object
	for _, x := range batch.Namespaces {
		objs = append(objs, x)
	}
	for _, x := range batch.Nodes {
		objs = append(objs, x)
	}
	for _, x := range batch.Pods {
		objs = append(objs, x)
	}
	for _, x := range batch.PVCs {
		objs = append(objs, x)
	}
	for _, x := range batch.PVs {
		objs = append(objs, x)
	}
	for _, x := range batch.StorageCls {
		objs = append(objs, x)
	}
	for _, x := range batch.DaemonSets {
		objs = append(objs, x)
	}
	for _, x := range batch.NodeClaims {
		objs = append(objs, x)
	}
	// NodePools: Karpenter's provisioner uses Ready, non-deleting, non-static pools, ordered by weight
	// (desc, ties by name desc). A nil nodeClassRef would panic in NewNodeClaimTemplate.
	var nodePools []*karpv1.NodePool
	for _, np := range batch.NodePools {
		np = np.DeepCopy()
		if np.Spec.Replicas != nil {
			warnf("nodepool %s is static (spec.replicas): Karpenter does not provision it dynamically; skipped", np.Name)
			continue
		}
		if !np.DeletionTimestamp.IsZero() {
			warnf("nodepool %s is being deleted; skipped", np.Name)
			continue
		}
		if np.Spec.Template.Spec.NodeClassRef == nil {
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
			warnf("nodepool %s has no nodeClassRef; using EC2NodeClass/default", np.Name)
		}
		nodePools = append(nodePools, np)
		objs = append(objs, np)
	}
	nodepoolutils.OrderByWeight(nodePools)
	if len(nodePools) == 0 {
		warnf("no usable NodePool in the batch: every pending pod will be unschedulable")
	}

	var kubeClient client.Client = fake.NewClientBuilder().
		WithScheme(scheme.Scheme).
		WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		Build()
	kubeClient = clusterScopedGetClient{kubeClient}

	// ---- cluster state: existing nodes, in-flight NodeClaims, bound pods, DaemonSets ---------------------
	clk := clock.RealClock{}
	cp := stubCloudProvider{its: ct.types}
	cluster := state.NewCluster(clk, kubeClient, cp)
	for _, nc := range batch.NodeClaims {
		if nc.Status.ProviderID == "" {
			warnf("nodeclaim %s has no status.providerID (not launched yet): Karpenter's cluster state ignores it", nc.Name)
			continue
		}
		cluster.UpdateNodeClaim(nc)
	}
	for _, n := range batch.Nodes {
		if err := cluster.UpdateNode(ctx, n); err != nil {
			warnf("node %s: %v", n.Name, err)
		}
	}
	for _, p := range bound {
		if err := cluster.UpdatePod(ctx, p); err != nil {
			warnf("bound pod %s: %v", podKey(p), err)
		}
	}
	var daemonSetPods []*corev1.Pod
	for _, ds := range batch.DaemonSets {
		if err := cluster.UpdateDaemonSet(ctx, ds); err != nil {
			warnf("daemonset %s/%s: %v", ds.Namespace, ds.Name, err)
		}
		// As Provisioner.getDaemonSetPods: a live pod of the DaemonSet if there is one, else one built from the
		// template; the template's required node affinity replaces the pod's (the DS controller overrides it).
		pod := cluster.GetDaemonSetPod(ds)
		if pod == nil {
			pod = daemonset.PodForDaemonSet(ds)
		}
		if a := ds.Spec.Template.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			if pod.Spec.Affinity == nil {
				pod.Spec.Affinity = &corev1.Affinity{}
			}
			if pod.Spec.Affinity.NodeAffinity == nil {
				pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
			}
			pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		daemonSetPods = append(daemonSetPods, pod)
	}
	stateNodes := cluster.DeepCopyNodes().Active()

	// ---- pod validation and volume requirements, as Provisioner.GetPendingPods / NewScheduler ---------------
	recorder := events.NewRecorder(&record.FakeRecorder{})
	prov := provisioning.NewProvisioner(kubeClient, recorder, cp, cluster, clk, nil, nil)
	volumeTopology := scheduling.NewVolumeTopology(kubeClient)
	volumeReqs := map[types.UID][]karpsched.Requirements{}
	var pods []*corev1.Pod
	for _, p := range pending {
		if err := prov.Validate(ctx, p); err != nil {
			unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter", Reason: "ignoring pod, " + err.Error()})
			continue
		}
		reqs, err := volumeTopology.GetRequirements(ctx, p)
		if err != nil {
			unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter", Reason: "failed getting volume topology requirements: " + err.Error()})
			continue
		}
		if len(reqs) > 0 {
			volumeReqs[p.UID] = reqs
		}
		pods = append(pods, p)
	}

	itsByPool := map[string][]*cloudprovider.InstanceType{}
	for _, np := range nodePools {
		// What a provider's GetInstanceTypes returns: every type of the catalog; the scheduler applies the
		// NodePool's requirements itself.
		itsByPool[np.Name] = ct.types
	}
	schedOpts := []scheduling.Options{
		scheduling.DisableReservedCapacityFallback,
		scheduling.NumConcurrentReconciles(o.concurrency),
		scheduling.MinValuesPolicy(options.MinValuesPolicyStrict),
	}
	if prefPolicy == options.PreferencePolicyIgnore {
		schedOpts = append(schedOpts, scheduling.IgnorePreferences)
	}
	tPrepared := time.Now()

	// ---- the scheduler --------------------------------------------------------------------------------
	var res scheduling.Results
	var solveErr error
	var tBuilt, tSolved, tTruncated time.Time
	timedOut := false
	if len(pods) > 0 && len(nodePools) > 0 {
		topo, err := scheduling.NewTopology(ctx, kubeClient, cluster, stateNodes, nodePools, itsByPool, pods, schedOpts...)
		if err != nil {
			return fmt.Errorf("tracking topology counts: %w", err)
		}
		s := scheduling.NewScheduler(ctx, kubeClient, nodePools, cluster, stateNodes, topo, itsByPool, daemonSetPods,
			recorder, clk, volumeReqs, nil, schedOpts...)
		tBuilt = time.Now()
		solveCtx := ctx
		var cancel context.CancelFunc = func() {}
		if d := solveTimeout(); d > 0 {
			solveCtx, cancel = context.WithTimeout(ctx, d)
		}
		res, solveErr = s.Solve(solveCtx, pods)
		cancel()
		tSolved = time.Now()
		if solveErr != nil {
			if !errors.Is(solveErr, context.DeadlineExceeded) {
				return fmt.Errorf("solve: %w", solveErr)
			}
			timedOut = true
		}
		res = res.TruncateInstanceTypes(ctx, scheduling.MaxInstanceTypes)
		tTruncated = time.Now()
	} else {
		tBuilt, tSolved, tTruncated = time.Now(), time.Now(), time.Now()
		// Provisioner.Schedule: without a dynamic NodePool it schedules nothing, not even onto existing nodes.
		res = scheduling.Results{PodErrors: map[*corev1.Pod]error{}}
		for _, p := range pods {
			res.PodErrors[p] = errors.New("no dynamic nodepools found")
		}
	}

	// ---- launches and the plan --------------------------------------------------------------------------
	plan := &Plan{Schema: "stowage.dev/plan/v1", NewNodes: []NewNode{}, ExistingNodes: []ExistingNodePlan{}, Placements: []Placement{}}
	placed := map[string]bool{}
	for _, en := range res.ExistingNodes {
		if len(en.Pods) == 0 {
			continue
		}
		ex := ExistingNodePlan{Name: en.Name()}
		for _, p := range en.Pods {
			ex.Pods = append(ex.Pods, podKey(p))
			plan.Placements = append(plan.Placements, Placement{Pod: podKey(p), Node: ex.Name})
			placed[podKey(p)] = true
		}
		plan.ExistingNodes = append(plan.ExistingNodes, ex)
	}
	npByName := lo.SliceToMap(nodePools, func(np *karpv1.NodePool) (string, *karpv1.NodePool) { return np.Name, np })
	// Karpenter's own random launch choices (KWOK's offering sample, Requirement.Any) come from this
	// source, so that one seed reproduces one run's launches; the scheduler's Go map order is not seeded.
	rng := rand.New(rand.NewSource(o.seed)) //nolint:gosec // a benchmark's tie-breaks, not a secret
	for i, nc := range res.NewNodeClaims {
		name := fmt.Sprintf("karpenter-%d", i)
		nn, err := resolveLaunch(nc, ct, npByName[nc.NodePoolName], name, rng)
		if err != nil {
			for _, p := range nc.Pods {
				unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter", Reason: "no launchable offering for its NodeClaim: " + err.Error()})
			}
			continue
		}
		for _, p := range nc.Pods {
			nn.Pods = append(nn.Pods, podKey(p))
			plan.Placements = append(plan.Placements, Placement{Pod: podKey(p), Node: name})
			placed[podKey(p)] = true
		}
		plan.CostPerHour += nn.PricePerHour
		if nn.PriceSource == "synthetic" {
			plan.SyntheticPrices = true
		}
		plan.NewNodes = append(plan.NewNodes, *nn)
	}
	errored := map[string]bool{}
	for p, err := range res.PodErrors {
		errored[podKey(p)] = true
		unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter", Reason: err.Error()})
	}
	for _, p := range pods {
		if !placed[podKey(p)] && !errored[podKey(p)] {
			reason := "not scheduled by Karpenter"
			if timedOut {
				reason = fmt.Sprintf("not reached: Solve timed out after %s (Karpenter would take it in a later loop)", solveTimeout())
			}
			unsched = append(unsched, Unschedulable{Pod: podKey(p), Plugin: "Karpenter", Reason: reason})
		}
	}
	sort.SliceStable(unsched, func(i, j int) bool { return unsched[i].Pod < unsched[j].Pod })
	plan.Unschedulable = append([]Unschedulable{}, unsched...)
	plan.Totals = Totals{NewNodes: len(plan.NewNodes), PodsPlaced: len(plan.Placements), PodsUnschedulable: len(unsched), CostPerHour: plan.CostPerHour}
	tDone := time.Now()

	status, detail := "heuristic", fmt.Sprintf("Karpenter provisioning scheduler, %s %s, concurrency %d, preference policy %s; launches resolved with the KWOK provider's cheapest-offering rule",
		karpenterModule, karpenterVersion(), o.concurrency, o.preference)
	if timedOut {
		status = "timeLimit"
		detail += fmt.Sprintf("; Solve hit its %s timeout and returned a partial result", solveTimeout())
	}
	plan.Solver = Solver{
		Name:   "karpenter",
		Status: status,
		Detail: detail,
		TimeMs: ms(tSolved.Sub(tBuilt)),
		Phases: []Phase{
			{Name: "load", TimeMs: ms(tLoaded.Sub(tStart))},
			{Name: "clusterState", TimeMs: ms(tPrepared.Sub(tLoaded))},
			{Name: "newTopologyAndScheduler", TimeMs: ms(tBuilt.Sub(tPrepared))},
			{Name: "solve", TimeMs: ms(tSolved.Sub(tBuilt))},
			{Name: "truncateInstanceTypes", TimeMs: ms(tTruncated.Sub(tSolved))},
			{Name: "resolveLaunches", TimeMs: ms(tDone.Sub(tTruncated))},
		},
	}
	js, err := jsonIndent(plan)
	if err != nil {
		return err
	}
	if o.out == "" || o.out == "-" {
		_, err = os.Stdout.Write(js)
		return err
	}
	return os.WriteFile(o.out, js, 0o644)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// solveTimeout mirrors the provisioner's one-minute Solve timeout; STOWAGE_KARPENTER_SOLVE_TIMEOUT (a Go
// duration, 0 = none) overrides it for benchmarks.
func solveTimeout() time.Duration {
	if v := os.Getenv("STOWAGE_KARPENTER_SOLVE_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		warnf("ignoring STOWAGE_KARPENTER_SOLVE_TIMEOUT=%q (not a Go duration)", v)
	}
	return time.Minute
}

// stderrLogger prints Karpenter's info (V(0)) and error logs on stderr; STOWAGE_KARPENTER_LOG_V raises the
// verbosity, STOWAGE_KARPENTER_LOG=off silences it.
func stderrLogger() logr.Logger {
	if strings.EqualFold(os.Getenv("STOWAGE_KARPENTER_LOG"), "off") {
		return logr.Discard()
	}
	v := 0
	fmt.Sscan(os.Getenv("STOWAGE_KARPENTER_LOG_V"), &v)
	return funcr.New(func(prefix, args string) {
		fmt.Fprintf(os.Stderr, "karpenter: %s %s\n", prefix, args)
	}, funcr.Options{Verbosity: v})
}
