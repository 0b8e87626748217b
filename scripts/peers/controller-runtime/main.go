// myownshell-controller-runtime: seed 004's MyOwnShell operator written the way kubebuilder's
// tutorials write one (controller-runtime's manager, a cached client, Owns() on the child,
// a finalizer, status through the status subresource). It is bosun's controller-runtime peer
// in the benchmarks (bench/run --only myownshell-cr): the same CR gets the same Deployment and
// the same status (observedGeneration, readyReplicas) that bosun's MyOwnShell writes.
// controller-runtime's defaults: no client-side rate limit (GetConfig sets QPS -1 and leaves
// throttling to the API server's priority and fairness) and one worker per controller.
//
// The project's own program, not a copy of a tutorial: it follows the pattern the kubebuilder
// book teaches, at controller-runtime's defaults unless a flag says otherwise.
package main

import (
	"context"
	"flag"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const finalizer = "my-first-operator.jgato.io/finalizer"

var gvk = schema.GroupVersionKind{Group: "my-first-operator.jgato.io", Version: "v1alpha1", Kind: "MyOwnShell"}

const command = "echo The app is running, You can now ssh into for a while! && sleep 99999999 "

type reconciler struct {
	client.Client
	scheme *runtime.Scheme
}

func newShell() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	shell := newShell()
	if err := r.Get(ctx, req.NamespacedName, shell); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if shell.GetDeletionTimestamp() != nil {
		if controllerutil.ContainsFinalizer(shell, finalizer) {
			controllerutil.RemoveFinalizer(shell, finalizer)
			return ctrl.Result{}, r.Update(ctx, shell)
		}
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(shell, finalizer) {
		controllerutil.AddFinalizer(shell, finalizer)
		if err := r.Update(ctx, shell); err != nil {
			return ctrl.Result{}, err
		}
	}
	size, _, _ := unstructured.NestedInt64(shell.Object, "spec", "size")
	replicas := int32(size)

	found := &appsv1.Deployment{}
	err := r.Get(ctx, req.NamespacedName, found)
	switch {
	case apierrors.IsNotFound(err):
		dep := r.deployment(shell, replicas)
		if err := ctrl.SetControllerReference(shell, dep, r.scheme); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, dep); err != nil {
			return ctrl.Result{}, err
		}
		found = dep
	case err != nil:
		return ctrl.Result{}, err
	case found.Spec.Replicas == nil || *found.Spec.Replicas != replicas:
		found.Spec.Replicas = &replicas
		if err := r.Update(ctx, found); err != nil {
			return ctrl.Result{}, err
		}
	}

	ready := int64(found.Status.ReadyReplicas)
	observed, seen, _ := unstructured.NestedInt64(shell.Object, "status", "observedGeneration")
	current, _, _ := unstructured.NestedInt64(shell.Object, "status", "readyReplicas")
	if !seen || observed != shell.GetGeneration() || current != ready {
		_ = unstructured.SetNestedField(shell.Object, shell.GetGeneration(), "status", "observedGeneration")
		_ = unstructured.SetNestedField(shell.Object, ready, "status", "readyReplicas")
		if err := r.Status().Update(ctx, shell); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func (r *reconciler) deployment(shell *unstructured.Unstructured, replicas int32) *appsv1.Deployment {
	ls := map[string]string{"app": "myownshell", "myownshell_cr": shell.GetName()}
	meta := map[string]string{"app": "myownshell", "myownshell_cr": shell.GetName(), "app.kubernetes.io/managed-by": "controller-runtime"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: shell.GetName(), Namespace: shell.GetNamespace(), Labels: meta},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ls},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:    "busybox",
					Image:   "busybox:latest",
					Command: []string{"sh", "-c", command},
				}}},
			},
		},
	}
}

func main() {
	var metricsAddr, probeAddr string
	var qps float64
	var burst, workers int
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "metrics address (0 turns metrics off)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "probe address")
	flag.Float64Var(&qps, "qps", 0, "client QPS (0: controller-runtime's default, no client-side limit: it relies on the server's priority and fairness)")
	flag.IntVar(&burst, "burst", 0, "client burst (with --qps)")
	flag.IntVar(&workers, "workers", 1, "MaxConcurrentReconciles (controller-runtime's default is 1)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))

	cfg := ctrl.GetConfigOrDie()
	if qps != 0 {
		cfg.QPS = float32(qps)
	}
	if burst != 0 {
		cfg.Burst = burst
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
	})
	if err != nil {
		ctrl.Log.Error(err, "unable to start manager")
		os.Exit(1)
	}
	r := &reconciler{Client: mgr.GetClient(), scheme: mgr.GetScheme()}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(newShell()).
		Owns(&appsv1.Deployment{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r); err != nil {
		ctrl.Log.Error(err, "unable to create controller")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
