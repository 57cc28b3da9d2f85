//go:build race

package mcpproxy_test

// raceEnabled: the race detector is on, which slows every byte the big
// tests move about tenfold and makes allocations larger.
const raceEnabled = true
