// Argo CD's health-script engine: a health.lua run the way Argo CD v3.6.1's util/lua runs it,
// on the same Lua implementation (github.com/yuin/gopher-lua) and JSON encoder
// (layeh.com/gopher-json) at the versions its go.mod pins. Written from reading util/lua; the
// behaviour reproduced, step by step:
//
//   - a fresh state per evaluation; all standard libraries only with useOpenLibs, otherwise
//     none, then package, base and table opened explicitly, plus Argo CD's "safe os" (time and
//     date), which its opener registers under the *table* module's name, so the default sandbox
//     has table.time/table.date and no global os;
//   - package.preload.os is the safe os, so `require("os")` works in the sandbox;
//   - a one-second deadline through the state's context;
//   - `obj` decoded from the unstructured object (int64 and float64 alike become LNumber,
//     maps tables, slices arrays, nil LNil);
//   - the returned table encoded with gopher-json and unmarshalled into {status, message}: a
//     table that encodes as an array (an empty table) or a field of the wrong JSON type gives
//     an empty health; a status outside Argo CD's six gives Unknown with Argo CD's fixed text;
//     nil gives no health; any other return type, and any script error, is an error, which the
//     application controller shows as Unknown with the error's text.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

// Argo CD's text for a status outside its six health codes.
const argoInvalidHealthStatus = "Lua returned an invalid health status"

// The health codes Argo CD accepts from a script (gitops-engine's HealthStatusCode values).
var argoHealthCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true,
	"Healthy": true, "Degraded": true, "Missing": true,
}

type argocdRequest struct {
	Script      string `json:"script"`
	UseOpenLibs bool   `json:"useOpenLibs,omitempty"`
}

// argocdVerdict is what Argo CD shows: Status and Message of the resource health. Error is the
// script error behind an Unknown (also in Message, as the controller reports it); None marks a
// script that returned nil (Argo CD then has no health for the object).
type argocdVerdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
	None    bool   `json:"none,omitempty"`
}

type argoHealth struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

func argocdHealth(object map[string]any, req argocdRequest) argocdVerdict {
	h, err := runHealthScript(object, req.Script, req.UseOpenLibs)
	switch {
	case err != nil:
		return argocdVerdict{Status: "Unknown", Message: err.Error(), Error: err.Error()}
	case h == nil:
		return argocdVerdict{None: true}
	default:
		return argocdVerdict{Status: h.Status, Message: h.Message}
	}
}

// runArgoScript runs script on object as Argo CD's VM.runLua does and hands the value the
// script returned to use, while the state is still open.
func runArgoScript(object map[string]any, script string, openLibs bool, use func(lua.LValue) error) error {
	L := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.OsLibName, openSafeOsAsTable},
	} {
		if err := L.CallByParam(lua.P{Fn: L.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return fmt.Errorf("opening Lua library %s: %w", lib.name, err)
		}
	}
	L.PreloadModule(lua.OsLibName, safeOsModule)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	L.SetContext(ctx)
	L.SetGlobal("obj", toLua(L, object))

	fn, err := L.LoadString(script)
	if err == nil {
		L.Push(fn)
		err = L.PCall(0, lua.MultRet, nil)
	}
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
		// Argo CD drops the Lua stack trace from run errors.
		apiErr.StackTrace = ""
		err = apiErr
	}
	if err != nil {
		return err
	}
	return use(L.Get(-1))
}

func runHealthScript(object map[string]any, script string, openLibs bool) (*argoHealth, error) {
	var h *argoHealth
	err := runArgoScript(object, script, openLibs, func(ret lua.LValue) error {
		var err error
		h, err = healthOf(ret)
		return err
	})
	return h, err
}

// healthOf reads a health script's returned value as Argo CD does.
func healthOf(ret lua.LValue) (*argoHealth, error) {
	switch ret.Type() {
	case lua.LTNil:
		return nil, nil
	case lua.LTTable:
	default:
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type().String())
	}
	encoded, err := luajson.Encode(ret)
	if err != nil {
		return nil, err
	}
	h := &argoHealth{}
	if err := json.Unmarshal(encoded, h); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &argoHealth{}, nil
		}
		return nil, err
	}
	if !argoHealthCodes[h.Status] {
		return &argoHealth{Status: "Unknown", Message: argoInvalidHealthStatus}, nil
	}
	return h, nil
}

// toLua turns an unstructured value into a Lua value, numbers of every Go type into LNumber.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case json.Number:
		return lua.LString(x)
	case int:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, item := range x {
			t.Append(toLua(L, item))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(x))
		for k, item := range x {
			t.RawSetH(lua.LString(k), toLua(L, item))
		}
		return t
	default:
		return lua.LNil
	}
}

var safeOsFunctions = map[string]lua.LGFunction{"time": safeOsTime, "date": safeOsDate}

// openSafeOsAsTable is the opener Argo CD runs for the os library name: it registers the safe
// functions into the module named "table", not "os".
func openSafeOsAsTable(L *lua.LState) int {
	L.Push(L.RegisterModule(lua.TabLibName, safeOsFunctions))
	return 1
}

func safeOsModule(L *lua.LState) int {
	L.Push(L.SetFuncs(L.NewTable(), safeOsFunctions))
	return 1
}

func intField(t *lua.LTable, key string, def int) int {
	if n, ok := t.RawGetString(key).(lua.LNumber); ok {
		return int(n)
	}
	return def
}

// os.time([table]): now, or the local time the table names (hour defaults to 12).
func safeOsTime(L *lua.LState) int {
	if L.GetTop() == 0 {
		L.Push(lua.LNumber(time.Now().Unix()))
		return 1
	}
	t := L.CheckTable(1)
	at := time.Date(intField(t, "year", -1), time.Month(intField(t, "month", -1)), intField(t, "day", -1),
		intField(t, "hour", 12), intField(t, "min", 0), intField(t, "sec", 0), 0, time.Local)
	L.Push(lua.LNumber(at.Unix()))
	return 1
}

// strftime conversions of os.date, as Go layouts.
var dateLayouts = map[byte]string{
	'a': "Mon", 'A': "Monday", 'b': "Jan", 'B': "January", 'c': "02 Jan 06 15:04 MST",
	'd': "02", 'F': "2006-01-02", 'H': "15", 'I': "03", 'm': "01", 'M': "04", 'p': "PM",
	'P': "pm", 'S': "05", 'x': "15/04/05", 'X': "15:04:05", 'y': "06", 'Y': "2006",
	'z': "-0700", 'Z': "MST",
}

// os.date([format [, time]]): "!" for UTC, "*t" for a table, otherwise strftime-style text.
func safeOsDate(L *lua.LState) int {
	at := time.Now()
	format := "%c"
	if L.GetTop() >= 1 {
		format = L.CheckString(1)
		if strings.HasPrefix(format, "!") {
			at = at.UTC()
			format = strings.TrimLeft(format, "!")
		}
		if L.GetTop() >= 2 {
			at = time.Unix(L.CheckInt64(2), 0)
		}
		if strings.HasPrefix(format, "*t") {
			t := L.NewTable()
			for k, v := range map[string]int{
				"year": at.Year(), "month": int(at.Month()), "day": at.Day(), "hour": at.Hour(),
				"min": at.Minute(), "sec": at.Second(), "wday": int(at.Weekday()) + 1, "yday": 0,
			} {
				t.RawSetString(k, lua.LNumber(v))
			}
			t.RawSetString("isdst", lua.LFalse)
			L.Push(t)
			return 1
		}
	}
	var out strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i == len(format)-1 {
			out.WriteByte(c)
			continue
		}
		i++
		switch f := format[i]; {
		case f == '%':
			out.WriteByte('%')
		case f == 'w':
			fmt.Fprint(&out, int(at.Weekday()))
		case dateLayouts[f] != "":
			out.WriteString(at.Format(dateLayouts[f]))
		default:
			out.WriteByte('%')
			out.WriteByte(f)
		}
	}
	L.Push(lua.LString(out.String()))
	return 1
}
