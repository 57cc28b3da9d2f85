//go:build race

package token

// raceEnabled: the race detector makes sync.Pool drop a share of what is
// put back, so allocation counts vary.
const raceEnabled = true
