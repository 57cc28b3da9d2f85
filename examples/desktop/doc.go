// Package desktop holds no code: it is the home of the desktop-agent config
// snippets in this folder (see README.md) and of the test that runs each of
// them against real spillway and bigtool binaries.
package desktop
