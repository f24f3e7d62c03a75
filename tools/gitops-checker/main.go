// Command gitops-checker answers, for Kubernetes objects given as JSON, what the real GitOps
// status engines say about them:
//
//   - kstatus: sigs.k8s.io/cli-utils/pkg/kstatus (status.Compute through the generic status
//     reader, so a Compute error is Unknown as the pollers report it);
//   - fluxKstatus: the same through github.com/fluxcd/cli-utils, the fork that Flux and
//     Helm 4 `--wait` use;
//   - flux: Flux's poller for the object with the request's healthCheckExprs: the CEL status
//     reader of github.com/fluxcd/pkg/runtime/cel when an entry matches the object's
//     group/kind, otherwise the fork's kstatus;
//   - argocd (when the request carries a script): Argo CD's health-script engine, gopher-lua
//     and gopher-json at Argo CD's pins, run as its util/lua runs it (argocd.go);
//   - argocdAction: Argo CD's resource-action discovery or one action, on the same engine
//     (argocdactions.go).
//
// Protocol: one JSON request per line on stdin, one JSON answer per line on stdout, in order:
//
//	{"id": 1, "object": {...}, "healthCheckExprs": [{"apiVersion", "kind", "current", "failed", "inProgress"}],
//	 "argocd": {"script": "...", "useOpenLibs": false}, "argocdOnly": false,
//	 "argocdAction": {"script": "...", "useOpenLibs": false, "discovery": false}}
//	{"id": 1, "kstatus": {"status", "message", "error"}, "fluxKstatus": {...}, "flux": {..., "reader"},
//	 "argocd": {"status", "message", "error", "none"},
//	 "argocdAction": {"discovered": [{"name", "disabled", "iconClass", "displayName"}],
//	                  "impacted": [{"operation", "resource"}], "error"}}
//
// A request that cannot be decoded gets {"id", "error"}; the process keeps serving.
// `gitops-checker -versions` prints the engine module versions it was built with, as JSON;
// `gitops-checker wait-for-set ...` runs Flux's wait loop against an API server (fluxwait.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	fluxreaders "github.com/fluxcd/cli-utils/pkg/kstatus/polling/statusreaders"
	fluxstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/polling/statusreaders"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type request struct {
	ID               json.RawMessage               `json:"id,omitempty"`
	Object           json.RawMessage               `json:"object"`
	HealthCheckExprs []kustomize.CustomHealthCheck `json:"healthCheckExprs,omitempty"`
	Argocd           *argocdRequest                `json:"argocd,omitempty"`
	ArgocdAction     *argocdActionRequest          `json:"argocdAction,omitempty"`
	// Only the Argo CD engine: for objects kstatus need not judge (test data of any shape).
	ArgocdOnly bool `json:"argocdOnly,omitempty"`
}

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
	// Which Flux reader answered: "cel" (healthCheckExprs) or "kstatus".
	Reader string `json:"reader,omitempty"`
}

type response struct {
	ID          json.RawMessage `json:"id,omitempty"`
	Kstatus     *verdict        `json:"kstatus,omitempty"`
	FluxKstatus *verdict        `json:"fluxKstatus,omitempty"`
	Flux        *verdict        `json:"flux,omitempty"`
	Argocd      *argocdVerdict  `json:"argocd,omitempty"`
	// Argo CD resource actions (argocdactions.go): discovered actions or the impacted objects.
	ArgocdAction *argocdActionVerdict `json:"argocdAction,omitempty"`
	Error        string               `json:"error,omitempty"`
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func check(ctx context.Context, req request) response {
	resp := response{ID: req.ID}
	if req.Argocd != nil {
		// Argo CD runs health scripts on objects of any shape (test data need no kind), decoded
		// as client-go decodes API responses: integers become int64.
		var object map[string]any
		if err := utiljson.Unmarshal(req.Object, &object); err != nil {
			resp.Error = fmt.Sprintf("decoding object: %v", err)
			return resp
		}
		v := argocdHealth(object, *req.Argocd)
		resp.Argocd = &v
	}
	if req.ArgocdAction != nil {
		var object map[string]any
		if err := utiljson.Unmarshal(req.Object, &object); err != nil {
			resp.Error = fmt.Sprintf("decoding object: %v", err)
			return resp
		}
		v := argocdAction(object, *req.ArgocdAction)
		resp.ArgocdAction = &v
	}
	if req.ArgocdOnly {
		return resp
	}
	u := &unstructured.Unstructured{}
	// The same decoding client-go applies to API responses: integers become int64.
	if err := u.UnmarshalJSON(req.Object); err != nil {
		resp.Error = fmt.Sprintf("decoding object: %v", err)
		return resp
	}

	rs, err := statusreaders.NewGenericStatusReader(nil, status.Compute).ReadStatusForObject(ctx, nil, u)
	if err != nil {
		resp.Error = fmt.Sprintf("kstatus: %v", err)
		return resp
	}
	resp.Kstatus = &verdict{Status: rs.Status.String(), Message: rs.Message, Error: errText(rs.Error)}

	fluxKstatus := fluxreaders.NewGenericStatusReader(nil, fluxstatus.Compute)
	frs, err := fluxKstatus.ReadStatusForObject(ctx, nil, u)
	if err != nil {
		resp.Error = fmt.Sprintf("flux kstatus: %v", err)
		return resp
	}
	resp.FluxKstatus = &verdict{Status: frs.Status.String(), Message: frs.Message, Error: errText(frs.Error)}

	resp.Flux = &verdict{Status: frs.Status.String(), Message: frs.Message, Error: errText(frs.Error), Reader: "kstatus"}
	if len(req.HealthCheckExprs) > 0 {
		newReader, err := fluxcel.NewStatusReader(req.HealthCheckExprs)
		if err != nil {
			resp.Error = fmt.Sprintf("healthCheckExprs: %v", err)
			return resp
		}
		reader := newReader(nil)
		gk := schema.FromAPIVersionAndKind(u.GetAPIVersion(), u.GetKind()).GroupKind()
		if reader.Supports(gk) {
			crs, err := reader.ReadStatusForObject(ctx, nil, u)
			if err != nil {
				resp.Error = fmt.Sprintf("healthCheckExprs: %v", err)
				return resp
			}
			resp.Flux = &verdict{Status: crs.Status.String(), Message: crs.Message, Error: errText(crs.Error), Reader: "cel"}
		}
	}
	return resp
}

func versions() map[string]string {
	out := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	out["go"] = info.GoVersion
	for _, dep := range info.Deps {
		switch {
		case dep.Path == "sigs.k8s.io/cli-utils",
			dep.Path == "github.com/fluxcd/cli-utils",
			dep.Path == "github.com/fluxcd/pkg/runtime",
			dep.Path == "github.com/fluxcd/pkg/apis/kustomize",
			dep.Path == "github.com/google/cel-go",
			dep.Path == "github.com/yuin/gopher-lua",
			dep.Path == "layeh.com/gopher-json",
			dep.Path == "github.com/fluxcd/pkg/ssa",
			dep.Path == "k8s.io/apimachinery":
			out[dep.Path] = dep.Version
		}
	}
	return out
}

func main() {
	if len(os.Args) > 1 && strings.TrimLeft(os.Args[1], "-") == "versions" {
		_ = json.NewEncoder(os.Stdout).Encode(versions())
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "wait-for-set" {
		os.Exit(waitForSetMain(os.Args[2:]))
	}
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var req request
		var resp response
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			resp = response{Error: fmt.Sprintf("decoding request: %v", err)}
		} else {
			resp = check(ctx, req)
		}
		if err := enc.Encode(resp); err != nil {
			fmt.Fprintf(os.Stderr, "gitops-checker: writing answer: %v\n", err)
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			fmt.Fprintf(os.Stderr, "gitops-checker: flushing answer: %v\n", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "gitops-checker: reading requests: %v\n", err)
		os.Exit(1)
	}
}
