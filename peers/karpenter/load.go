package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// Batch holds the typed objects of stowage's expanded batch (docs/formats.md §1).
type Batch struct {
	Pods         []*corev1.Pod
	Nodes        []*corev1.Node
	NodePools    []*karpv1.NodePool
	NodeClaims   []*karpv1.NodeClaim
	PVCs         []*corev1.PersistentVolumeClaim
	PVs          []*corev1.PersistentVolume
	StorageCls   []*storagev1.StorageClass
	Namespaces   []*corev1.Namespace
	DaemonSets   []*appsv1.DaemonSet
	skippedKinds map[string]int
}

// loadWorkloads reads files (or folders, recursively, *.yaml/*.yml/*.json in name order) holding Kubernetes
// objects as single documents, multi-document YAML, or v1 Lists, and decodes them with client-go's scheme
// (into which sigs.k8s.io/karpenter/pkg/apis/v1 registers NodePool and NodeClaim).
func loadWorkloads(paths []string) (*Batch, error) {
	b := &Batch{skippedKinds: map[string]int{}}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ext := strings.ToLower(filepath.Ext(path))
			if !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	decoder := scheme.Codecs.UniversalDeserializer()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		docs := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(fh), 4096)
		for i := 0; ; i++ {
			var raw map[string]any
			if err := docs.Decode(&raw); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				fh.Close()
				return nil, fmt.Errorf("%s: document %d: %w", f, i, err)
			}
			if len(raw) == 0 {
				continue
			}
			if err := b.addRaw(decoder, f, raw); err != nil {
				fh.Close()
				return nil, err
			}
		}
		fh.Close()
	}
	for kind, n := range b.skippedKinds {
		warnf("skipped %d object(s) of kind %s", n, kind)
	}
	return b, nil
}

func (b *Batch) addRaw(decoder runtime.Decoder, file string, raw map[string]any) error {
	kind, _ := raw["kind"].(string)
	apiVersion, _ := raw["apiVersion"].(string)
	if strings.HasSuffix(kind, "List") {
		items, _ := raw["items"].([]any)
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			if err := b.addRaw(decoder, file, m); err != nil {
				return err
			}
		}
		return nil
	}
	known := map[string]bool{
		"v1/Pod": true, "v1/Node": true, "v1/PersistentVolumeClaim": true, "v1/PersistentVolume": true,
		"v1/Namespace": true, "storage.k8s.io/v1/StorageClass": true, "apps/v1/DaemonSet": true,
		"karpenter.sh/v1/NodePool": true, "karpenter.sh/v1/NodeClaim": true,
	}
	if !known[apiVersion+"/"+kind] {
		if kind == "EC2NodeClass" {
			return nil // ignored on purpose: the catalog already holds what the provider would resolve
		}
		b.skippedKinds[apiVersion+"/"+kind]++
		return nil
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return err
	}
	obj, _, err := decoder.Decode(js, nil, nil)
	if err != nil {
		name := ""
		if md, ok := raw["metadata"].(map[string]any); ok {
			name, _ = md["name"].(string)
		}
		return fmt.Errorf("%s: decoding %s %s: %w", file, kind, name, err)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		b.Pods = append(b.Pods, o)
	case *corev1.Node:
		b.Nodes = append(b.Nodes, o)
	case *corev1.PersistentVolumeClaim:
		b.PVCs = append(b.PVCs, o)
	case *corev1.PersistentVolume:
		b.PVs = append(b.PVs, o)
	case *corev1.Namespace:
		b.Namespaces = append(b.Namespaces, o)
	case *storagev1.StorageClass:
		b.StorageCls = append(b.StorageCls, o)
	case *appsv1.DaemonSet:
		b.DaemonSets = append(b.DaemonSets, o)
	case *karpv1.NodePool:
		b.NodePools = append(b.NodePools, o)
	case *karpv1.NodeClaim:
		b.NodeClaims = append(b.NodeClaims, o)
	default:
		b.skippedKinds[fmt.Sprintf("%T", obj)]++
	}
	return nil
}

// jsonIndent is used for the plan; kept here to keep main.go about the scheduler.
func jsonIndent(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
