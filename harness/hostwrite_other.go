//go:build !unix

package harness

// hostWrites is false where WriteFile always writes through the sandbox.
const hostWrites = false

func writeHostFile(hp, path string, data []byte, mode string) error {
	panic("harness: writeHostFile without host writes")
}
