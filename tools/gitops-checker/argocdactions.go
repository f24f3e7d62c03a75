// Argo CD's resource actions, run the way Argo CD v3.6.1's util/lua runs them (on the engine of
// argocd.go: the same sandbox, deadline and object decoding). Written from reading util/lua:
//
//   - discovery (ExecuteResourceActionDiscovery): the script must return a table; it is
//     encoded with gopher-json and unmarshalled into a map from action name to a value whose
//     "disabled" (bool), "iconClass" and "displayName" make the action; a value that is not
//     an object (an empty table encodes as an array) gives the bare name, enabled;
//   - an action (ExecuteResourceAction): the script must return a table; encoded as JSON, an
//     array is the new-style list of {operation, resource}, anything else the modified object
//     itself (old style, a "patch"); a patched object is cleaned as cleanReturnedObj does (an
//     empty table the script left where the live object had a map or list is that map or list
//     again, since gopher-json cannot tell an empty map from an empty list).
//
// What Argo CD then does with a patched object (a JSON merge patch of the difference from the
// live object, status through the status subresource) is the caller's to do.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

type argocdActionRequest struct {
	Script      string `json:"script"`
	UseOpenLibs bool   `json:"useOpenLibs,omitempty"`
	// Discovery runs script as actions/discovery.lua; otherwise as an action.lua.
	Discovery bool `json:"discovery,omitempty"`
}

// argoResourceAction is Argo CD's ResourceAction as discovery returns it.
type argoResourceAction struct {
	Name        string `json:"name"`
	Disabled    bool   `json:"disabled"`
	IconClass   string `json:"iconClass,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

type argoImpacted struct {
	Operation string         `json:"operation"`
	Resource  map[string]any `json:"resource"`
}

type argocdActionVerdict struct {
	Discovered []argoResourceAction `json:"discovered,omitempty"`
	Impacted   []argoImpacted       `json:"impacted,omitempty"`
	Error      string               `json:"error,omitempty"`
}

func argocdAction(object map[string]any, req argocdActionRequest) argocdActionVerdict {
	var v argocdActionVerdict
	err := runArgoScript(object, req.Script, req.UseOpenLibs, func(ret lua.LValue) error {
		if ret.Type() != lua.LTTable {
			return fmt.Errorf("expect table output from Lua script, not %s", ret.Type().String())
		}
		encoded, err := luajson.Encode(ret)
		if err != nil {
			return err
		}
		if req.Discovery {
			v.Discovered, err = discovered(encoded)
		} else {
			v.Impacted, err = impacted(encoded, object)
		}
		return err
	})
	if err != nil {
		v.Error = err.Error()
	}
	return v
}

func discovered(encoded []byte) ([]argoResourceAction, error) {
	available := map[string]any{}
	if err := json.Unmarshal(encoded, &available); err != nil {
		return nil, err
	}
	out := []argoResourceAction{}
	for name, value := range available {
		action := argoResourceAction{Name: name}
		if m, ok := value.(map[string]any); ok {
			raw, err := json.Marshal(m)
			if err != nil {
				return nil, err
			}
			if err := json.Unmarshal(raw, &action); err != nil {
				return nil, err
			}
			action.Name = name
		}
		out = append(out, action)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func impacted(encoded []byte, live map[string]any) ([]argoImpacted, error) {
	if len(encoded) < 2 {
		return nil, errors.New("Lua returned an invalid response")
	}
	var out []argoImpacted
	if encoded[0] == '[' && encoded[len(encoded)-1] == ']' {
		if err := json.Unmarshal(encoded, &out); err != nil {
			return nil, err
		}
	} else {
		obj := map[string]any{}
		if err := json.Unmarshal(encoded, &obj); err != nil {
			return nil, err
		}
		out = []argoImpacted{{Operation: "patch", Resource: obj}}
	}
	for i := range out {
		if out[i].Operation == "patch" {
			out[i].Resource = cleanReturnedObj(out[i].Resource, live)
		}
	}
	return out, nil
}

// cleanReturnedObj is Argo CD's: an empty list where the live object has a map is the map.
func cleanReturnedObj(newObj, obj map[string]any) map[string]any {
	for key, oldValue := range obj {
		newValue, ok := newObj[key]
		if !ok {
			continue
		}
		switch n := newValue.(type) {
		case map[string]any:
			if o, ok := oldValue.(map[string]any); ok {
				newObj[key] = cleanReturnedObj(n, o)
			}
		case []any:
			switch o := oldValue.(type) {
			case map[string]any:
				if len(n) == 0 {
					newObj[key] = o
				}
			case []any:
				newObj[key] = cleanReturnedArray(n, o)
			}
		}
	}
	return newObj
}

func cleanReturnedArray(newObj, obj []any) []any {
	for i := range newObj {
		if i >= len(obj) {
			break
		}
		switch n := newObj[i].(type) {
		case map[string]any:
			if o, ok := obj[i].(map[string]any); ok {
				newObj[i] = cleanReturnedObj(n, o)
			}
		case []any:
			if o, ok := obj[i].([]any); ok {
				newObj[i] = cleanReturnedArray(n, o)
			}
		}
	}
	return newObj
}
