package child

import (
	"fmt"
	"runtime"
	"strings"
)

// inherited are the variables a child gets from Spillway's environment
// without being configured: what a program needs to find other programs
// (PATH), its user and home (npx and uvx keep their caches there; Start
// replaces HOME with a private directory unless HOME is configured), a shell,
// a locale (LANG, LC_*), a time zone, a scratch directory and a terminal
// type. Everything else, Spillway's own SPILLWAY_* settings, store
// credentials (AWS_*, MINIO_*) and proxies (whose URLs may carry
// passwords) included, reaches a child only when configured by name.
var inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TZ", "TMPDIR", "TERM"}

// inheritedWindows are what programs on Windows cannot start without.
var inheritedWindows = []string{"SYSTEMROOT", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA"}

// isInherited reports whether a child gets the variable name from
// Spillway's environment without it being configured.
func isInherited(name string) bool {
	if strings.HasPrefix(name, "LC_") {
		return true
	}
	for _, n := range inherited {
		if name == n {
			return true
		}
	}
	if runtime.GOOS == "windows" {
		for _, n := range inheritedWindows {
			if strings.EqualFold(name, n) {
				return true
			}
		}
	}
	return false
}

// Env builds a child's environment from Spillway's (environ, as
// os.Environ gives it) and the configured entries: the allow-listed
// variables, then each configured NAME with Spillway's value (skipped when
// unset), then each NAME=VALUE. A later entry for the same name wins. It
// fails on an entry that is no variable name (empty, with a NUL).
func Env(environ, configured []string) ([]string, error) {
	have := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			have[k] = v
		}
	}
	var order []string
	out := map[string]string{}
	set := func(k, v string) {
		if _, ok := out[k]; !ok {
			order = append(order, k)
		}
		out[k] = v
	}
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); isInherited(k) {
			set(k, v)
		}
	}
	for _, e := range configured {
		k, v, pair := strings.Cut(e, "=")
		if k == "" || strings.ContainsRune(e, 0) || strings.TrimSpace(k) != k {
			return nil, fmt.Errorf("upstream environment: %q is not NAME or NAME=VALUE", e)
		}
		if !pair {
			if v, ok := have[k]; ok {
				set(k, v)
			}
			continue
		}
		set(k, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+out[k])
	}
	return env, nil
}
