//go:build !linux

package journal

// watchFile has no file notifications here: readers rely on their tick.
func watchFile(string) (<-chan struct{}, func(), bool) { return nil, func() {}, false }
