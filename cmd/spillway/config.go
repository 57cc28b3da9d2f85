package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spillway-dev/spillway/artifact/token"
)

// parseLayered parses args into fs, then fills every flag not given on the
// command line from the environment (SPILLWAY_<FLAG_NAME>) and then from the
// YAML file named by the "config" flag, whose keys are the flag names.
// Precedence: command line, environment, config file, default.
func parseLayered(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	file, err := readConfig(fs, getenv)
	if err != nil {
		return err
	}
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] || f.Name == "config" {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
			return
		}
		if v, ok := file[f.Name]; ok {
			s, e := yamlScalar(v)
			if e == nil {
				e = f.Value.Set(s)
			}
			if e != nil {
				err = fmt.Errorf("config %s: %w", f.Name, e)
			}
		}
	})
	return err
}

// readConfig reads the YAML file the "config" flag names (or
// SPILLWAY_CONFIG, when the flag is not given): nil without one. Every
// key but servers must be a flag of fs, and a file that sets a secret
// must be as private as a secret file.
func readConfig(fs *flag.FlagSet, getenv func(string) string) (map[string]any, error) {
	cf := fs.Lookup("config")
	if cf == nil {
		return nil, nil
	}
	if cf.Value.String() == "" {
		if v := getenv(envName("config")); v != "" {
			cf.Value.Set(v)
		}
	}
	name := cf.Value.String()
	if name == "" {
		return nil, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// The servers list, the one key that is no flag, is read where the
	// proxy is built (loadServers); here it is only decoded strictly.
	parsed, err := parseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	file := parsed.Flags
	for k := range file {
		if fs.Lookup(k) == nil {
			return nil, fmt.Errorf("config %s: unknown setting %q", name, k)
		}
		if _, secret := secretFlags[k]; secret {
			// The secret is as private as the file: refuse one that
			// others (an --upstream-user child) may read, as
			// --auth-tokens-file and --key-file are refused.
			if _, err := token.ReadSecretFile(name); err != nil {
				return nil, fmt.Errorf("config sets %s: %w", k, err)
			}
		}
	}
	return file, nil
}

func envName(flagName string) string {
	return "SPILLWAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// yamlScalar turns a config value into the flag's string form: maps become
// "k=v,k=v" (sorted), lists "a,b".
func yamlScalar(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			s, err := yamlScalar(v[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, k+"="+s)
		}
		return strings.Join(parts, ","), nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, err := yamlScalar(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	default:
		return fmt.Sprint(v), nil
	}
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
