// Package optimizers: see the issue tracker; being built.
package optimizers
