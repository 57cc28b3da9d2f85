package gateway

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Prefix modes: when a tool's or prompt's name gets its upstream's name in
// front (and a resource URI its upstream's name as a scheme prefix).
const (
	// PrefixAlways prefixes every tool and prompt name and every resource
	// URI, so that each name says its upstream.
	PrefixAlways = "always"
	// PrefixNever passes names as the upstreams give them; when two
	// upstreams have a tool of the same name, the one configured first
	// is listed and called.
	PrefixNever = "never"
	// PrefixCollision prefixes only the names two upstreams share.
	// Resource URIs are not prefixed.
	PrefixCollision = "collision"
)

// validName is what an upstream's name may be: it becomes part of tool
// names (the spec's [A-Za-z0-9_.-]) and of URI schemes (a letter, then
// letters, digits, '+', '-' or '.'), so it is the intersection, without
// the separators, and short enough to leave room for the tool's own name.
var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}$`)

// maxToolName is the longest tool name the specification allows.
const maxToolName = 128

// CheckName returns an error when name cannot be an upstream's name.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("upstream name %q: want a letter, then up to 31 letters, digits or '-'", name)
	}
	return nil
}

// CheckSeparator returns an error when sep cannot join an upstream's name
// and a tool's: it must be made of the tool-name characters that no
// upstream name holds.
func CheckSeparator(sep string) error {
	if sep == "" || len(sep) > 4 || strings.Trim(sep, "_.") != "" {
		return fmt.Errorf("prefix separator %q: want one to four of '_' and '.'", sep)
	}
	return nil
}

// CheckGlobs returns an error for the first pattern that is not a valid
// path.Match pattern.
func CheckGlobs(globs []string) error {
	for _, g := range globs {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("tool pattern %q: %w", g, err)
		}
	}
	return nil
}

// toolAllowed reports whether a tool named name (as its upstream names
// it) passes the allow and deny lists: listed in allow (or allow empty)
// and not in deny.
func toolAllowed(allow, deny []string, name string) bool {
	if len(allow) > 0 && !matchAny(allow, name) {
		return false
	}
	return !matchAny(deny, name)
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// prefixed returns upstream's name joined to name with sep.
func prefixed(upstream, sep, name string) string { return upstream + sep + name }

// splitPrefixed splits a name made by prefixed, given the upstreams'
// names; ok is false when name starts with none of them and sep.
func splitPrefixed(names []string, sep, name string) (upstream, orig string, ok bool) {
	for _, u := range names {
		if rest, found := strings.CutPrefix(name, u+sep); found && rest != "" {
			return u, rest, true
		}
	}
	return "", "", false
}

// prefixURI returns uri with upstream's name in front of its scheme:
// "file:///a" becomes "fs+file:///a", still a URI (a scheme may hold '+')
// and still a URI template when uri is one.
func prefixURI(upstream, uri string) string { return upstream + "+" + uri }

// splitURI undoes prefixURI, given the upstreams' names.
func splitURI(names []string, uri string) (upstream, orig string, ok bool) {
	for _, u := range names {
		if rest, found := strings.CutPrefix(uri, u+"+"); found && rest != "" {
			return u, rest, true
		}
	}
	return "", "", false
}

// templatePrefix is the literal part of a URI template before its first
// expression: a URI read from the template starts with it.
func templatePrefix(t string) string {
	if i := strings.IndexByte(t, '{'); i >= 0 {
		return t[:i]
	}
	return t
}
