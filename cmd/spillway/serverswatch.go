package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// configPoll is how often a serving gateway reads its config file for
// changes.
const configPoll = time.Second

// watchConfig applies changes of the config file's servers while the
// server runs: every poll the file is read, and when its bytes changed
// the servers it lists replace the running ones (UpdateServers: an added
// server is connected, a removed one drained, a changed one reconnected,
// and clients are told their lists changed). A change to another key is
// logged as taking effect at the next restart. A file that cannot be
// read, parsed or applied is logged, once for each error, and the
// running servers stay. Header files are read every poll too, as the
// signing keys are: a rotated credential reconnects its server.
func (s *server) watchConfig(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	cur, lastErr := s.servers, ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next, err := s.reloadConfig(cur)
		if err != nil {
			if err.Error() != lastErr {
				s.log.Error("config file not applied; the running servers stay", "path", s.cfg.config, "err", err)
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
		if next != nil {
			cur = next
		}
	}
}

// reloadConfig reads the config file and applies its servers when they
// differ from cur's. It returns the file as applied, nil when its bytes
// have not changed.
func (s *server) reloadConfig(cur *loadedServers) (*loadedServers, error) {
	b, err := os.ReadFile(s.cfg.config)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(b) == cur.sum {
		return s.reloadHeaderFiles(cur)
	}
	next, err := loadServersFrom(s.cfg.config, b, s.cfg.env())
	if err != nil {
		return nil, err
	}
	if next.servers == nil {
		return nil, errors.New("the file lists no servers any more: keep one at least (without any, restart Spillway)")
	}
	added, removed, changed := diffServers(cur.servers, next.servers)
	if len(added)+len(removed)+len(changed) > 0 {
		if err := s.proxy.UpdateServers(next.servers); err != nil {
			return nil, err
		}
		s.log.Info("servers reloaded from the config file", "added", added, "removed", removed, "changed", changed)
	}
	if keys := changedKeys(cur.flags, next.flags); len(keys) > 0 {
		s.log.Warn("config file settings changed; they apply at the next restart", "keys", keys)
	}
	return next, nil
}

// reloadHeaderFiles reads cur's header files again and reconnects the
// servers whose header values changed. It returns cur with the new
// values, nil when none changed.
func (s *server) reloadHeaderFiles(cur *loadedServers) (*loadedServers, error) {
	if !cur.files {
		return nil, nil
	}
	servers, err := resolveServers(cur.list, s.cfg.env())
	if err != nil {
		return nil, err
	}
	_, _, changed := diffServers(cur.servers, servers)
	if len(changed) == 0 {
		return nil, nil
	}
	if err := s.proxy.UpdateServers(servers); err != nil {
		return nil, err
	}
	s.log.Info("servers reconnected: a header file changed", "changed", changed)
	next := *cur
	next.servers = servers
	return &next, nil
}

// diffServers names the servers next adds to cur, removes from it, and
// configures otherwise.
func diffServers(cur, next []mcpproxy.Server) (added, removed, changed []string) {
	old := map[string]mcpproxy.Server{}
	for _, s := range cur {
		old[s.Name] = s
	}
	for _, s := range next {
		o, ok := old[s.Name]
		switch {
		case !ok:
			added = append(added, s.Name)
		case !reflect.DeepEqual(o, s):
			changed = append(changed, s.Name)
		}
		delete(old, s.Name)
	}
	for name := range old {
		removed = append(removed, name)
	}
	slices.Sort(removed)
	return added, removed, changed
}

// changedKeys names the keys whose values differ between two files'
// flag settings.
func changedKeys(a, b map[string]any) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || fmt.Sprint(v) != fmt.Sprint(w) {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// serverNames are the servers' names, for the log.
func serverNames(servers []mcpproxy.Server) []string {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name
	}
	return names
}
