package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// clusterScopedGetClient fixes one difference between controller-runtime's fake client and a real API client:
// Karpenter gets PersistentVolumes with the pod's namespace in the key
// (VolumeTopology.getPersistentVolumeRequirements). A real client (and the informer cache) ignores the namespace
// of a cluster-scoped object; the fake client's object tracker does not and answers NotFound. Clearing the
// namespace for cluster-scoped kinds restores the real behaviour.
type clusterScopedGetClient struct{ client.Client }

func isClusterScoped(obj client.Object) bool {
	switch obj.(type) {
	case *corev1.PersistentVolume, *corev1.Node, *corev1.Namespace, *storagev1.StorageClass, *storagev1.CSINode,
		*storagev1.CSIDriver, *storagev1.VolumeAttachment, *karpv1.NodePool, *karpv1.NodeClaim,
		*resourcev1.ResourceSlice, *resourcev1.DeviceClass:
		return true
	}
	return false
}

func (c clusterScopedGetClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Namespace != "" && isClusterScoped(obj) {
		key.Namespace = ""
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
