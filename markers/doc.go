// Package markers: see the issue tracker; being built.
package markers
