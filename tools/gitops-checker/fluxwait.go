// Flux's wait loop: `gitops-checker wait-for-set` runs fluxcd/pkg/ssa's
// ResourceManager.WaitForSetWithContext, the loop kustomize-controller and helm-controller run
// for health checks (poll every interval with Flux's kstatus poller, succeed when every object
// is Current, stop early when all are Current or Failed, abort on the first Failed with
// fail-fast, else time out), against a live API server.
//
//	gitops-checker wait-for-set -kubeconfig PATH [-interval 1s] [-timeout 60s] [-fail-fast=true] \
//	    GROUP/KIND/NAMESPACE/NAME ...
//
// prints one JSON line: {"ok", "error", "elapsedMs"}; exit status 0 whenever the wait ran.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

type waitResult struct {
	OK        bool   `json:"ok"`
	Error     string `json:"error,omitempty"`
	ElapsedMs int64  `json:"elapsedMs"`
}

// parseObjRef reads GROUP/KIND/NAMESPACE/NAME (GROUP empty for the core group).
func parseObjRef(s string) (object.ObjMetadata, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[1] == "" || parts[3] == "" {
		return object.ObjMetadata{}, fmt.Errorf("%q is not GROUP/KIND/NAMESPACE/NAME", s)
	}
	return object.ObjMetadata{
		GroupKind: schema.GroupKind{Group: parts[0], Kind: parts[1]},
		Namespace: parts[2],
		Name:      parts[3],
	}, nil
}

func newResourceManager(kubeconfig string) (*ssa.ResourceManager, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Mapper: mapper})
	if err != nil {
		return nil, err
	}
	// The poller kustomize-controller builds, without custom readers: Flux's kstatus.
	poller := polling.NewStatusPoller(c, mapper, polling.Options{})
	return ssa.NewResourceManager(c, poller, ssa.Owner{Field: "twc-gitops-checker", Group: "gitops-checker.twc.local"}), nil
}

func waitForSetMain(args []string) int {
	fs := flag.NewFlagSet("wait-for-set", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	interval := fs.Duration("interval", time.Second, "poll interval")
	timeout := fs.Duration("timeout", time.Minute, "timeout")
	failFast := fs.Bool("fail-fast", true, "stop at the first Failed object (kustomize-controller's default)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *kubeconfig == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "wait-for-set: -kubeconfig and at least one GROUP/KIND/NAMESPACE/NAME are required")
		return 2
	}
	var set object.ObjMetadataSet
	for _, arg := range fs.Args() {
		ref, err := parseObjRef(arg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "wait-for-set: %v\n", err)
			return 2
		}
		set = append(set, ref)
	}
	manager, err := newResourceManager(*kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wait-for-set: %v\n", err)
		return 1
	}
	start := time.Now()
	err = manager.WaitForSetWithContext(context.Background(), set, ssa.WaitOptions{
		Interval: *interval,
		Timeout:  *timeout,
		FailFast: *failFast,
	})
	res := waitResult{OK: err == nil, ElapsedMs: time.Since(start).Milliseconds()}
	if err != nil {
		res.Error = err.Error()
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "wait-for-set: %v\n", err)
		return 1
	}
	return 0
}
