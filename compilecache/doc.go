// Package compilecache: see the issue tracker; being built.
package compilecache
