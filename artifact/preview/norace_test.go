//go:build !race

package preview

const raceEnabled = false
