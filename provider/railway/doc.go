// Package railway is corral's provider for Railway sandboxes.
package railway
