//go:build !linux

package main

// notDumpable has no portable equivalent: elsewhere, only a separate uid
// keeps a child from reading this process's environment.
func notDumpable() error { return nil }
